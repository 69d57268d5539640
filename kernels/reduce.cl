/* reduce.cl - whole-tensor reductions in two passes: per-work-group partials, then one group
 * combines them. Tree order within a group keeps rounding error low.
 *
 * Defines, set by lib/opencl/reduce.c: NAME (sum_f32), T (input type), ACC (accumulator: the
 * float type itself, ulong for integers so that overflow wraps), TO (result type).
 * Both kernels need a power-of-two local size.
 */
#define CLT_BLOCK 128

__kernel void CLT_CAT(NAME, _partial)(__global const T *restrict in, ulong n, ulong step,
                                      __global ACC *restrict partial, __local ACC *scratch) {
  ACC acc = 0;
#if CLT_CHUNKED
  /* Sum the chunk in blocks so that rounding error grows with the number of blocks only. */
  ulong start = (ulong)get_global_id(0) * step, end = min(start + step, n);
  for (ulong b = start; b < end; b += CLT_BLOCK) {
    ACC s = 0;
    ulong e = min(b + CLT_BLOCK, end);
    for (ulong i = b; i < e; i++)
      s += (ACC)in[i];
    acc += s;
  }
#else
  CLT_FOR_EACH(i, n, step) acc += (ACC)in[i];
#endif
  size_t lid = get_local_id(0);
  scratch[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s)
      scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0)
    partial[get_group_id(0)] = scratch[0];
}

__kernel void CLT_CAT(NAME, _final)(__global const ACC *restrict partial, uint np,
                                    __global TO *restrict out, __local ACC *scratch) {
  size_t lid = get_local_id(0), lsz = get_local_size(0);
  ACC acc = 0;
  for (uint i = lid; i < np; i += lsz)
    acc += partial[i];
  scratch[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = lsz / 2; s > 0; s >>= 1) {
    if (lid < s)
      scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0)
    out[0] = (TO)scratch[0];
}
