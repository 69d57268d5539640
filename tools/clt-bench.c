/* SPDX-License-Identifier: MIT */
/* clt-bench - is the device worth it, and from which size? The CPU-versus-device experiment.
 *
 *   $ clt-bench                         matmul of random (n, n) f32 matrices, cpu against the
 *                                       default device (cl:0 if the default is cpu), n = 50..4000
 *   $ clt-bench --plot bench.svg        the same, with a log-log plot of time against size
 *   $ clt-bench --what transfer         H2D, D2H, D2D bandwidth, pageable and pinned host memory
 *   $ clt-bench --what elementwise      clt_add throughput on cpu and on the device
 *
 * Every time is a median of several runs after a warm-up, and the device is synchronized before
 * the clock is read (--naive adds the number read without synchronizing, to show how wrong it
 * is). Results go to stdout as a table, and to --csv FILE and --plot FILE.svg on request; a
 * progress bar goes to stderr when stderr is a terminal. Exit status: 0 done, 1 a device or I/O
 * failure while measuring, 2 a usage error (bad option, unknown device).
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *program = "clt-bench";

#define MAX_SIZES 64
#define MAX_SERIES 6
#define SLOW_RUN_MS 2000.0    /* a single run longer than this is timed once */
#define SIZE_BUDGET_MS 6000.0 /* otherwise, about this much time per size and device */

/* ---- plumbing ------------------------------------------------------------------------------ */

/* The progress bar on stderr, drawn only when stderr is a terminal. */
static struct {
  int on;
  double total, done;
} progress;

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s%s: ", progress.on ? "\r\033[K" : "", program);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static void usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", program);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry '%s --help' for more information.\n", program);
  va_end(ap);
  exit(2);
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    clt_status s_ = (call);                                                                        \
    if (s_ != CLT_OK)                                                                              \
      die("%s failed: %s: %s", #call, clt_status_name(s_), clt_last_error());                      \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* v with about four significant digits, right-aligned in width columns, without an exponent. */
static void print_fixed(int width, double v) {
  int decimals = v < 0.01 ? 5 : v < 0.1 ? 4 : v < 1 ? 3 : v < 100 ? 2 : v < 1000 ? 1 : 0;
  printf(" %*.*f", width, decimals, v);
}

static void usage(FILE *f) {
  fprintf(
      f,
      "Usage: %s [OPTION]...\n"
      "Times the same work on cpu (the host) and on a device and says from which size the\n"
      "device is faster. Each time is the median of several runs after a warm-up, with the\n"
      "device synchronized before the clock is read.\n"
      "\n"
      "  --what WHAT     matmul (default): random (n, n) f32 matrices multiplied;\n"
      "                  transfer: bandwidth host to device, device to host and device to\n"
      "                  device, from pageable and from pinned host memory;\n"
      "                  elementwise: clt_add throughput\n"
      "  --device NAME   the device to compare with cpu (default: the default device, or cl:0\n"
      "                  when that is cpu); see clt-devices\n"
      "  --sizes LIST    comma-separated sizes: n for matmul (default\n"
      "                  50,100,200,400,800,1000,1600,2000,3000,4000), f32 elements per tensor\n"
      "                  for transfer and elementwise; K and M multiply by 1024 and 1024^2\n"
      "  --runs N        timed runs per size and device, after a warm-up (default 5); sizes\n"
      "                  whose single run takes more than about 2 s are timed fewer times\n"
      "  --naive         add a column timed without synchronizing the device (the wrong number)\n"
      "  --csv FILE      also write the results as CSV to FILE\n"
      "  --plot FILE     also draw them as an SVG plot (log-log) to FILE\n"
      "  --help          print this help and exit\n"
      "  --version       print the version and exit\n"
      "\n"
      "Exit status: 0 done, 1 a failure while measuring, 2 a usage error.\n"
      "POCL_DEVICES=\"pthread pthread\" gives two OpenCL CPU devices with PoCL.\n",
      program);
}

/* ---- progress bar (stderr, terminals only) ---------------------------------------------- */

static void progress_show(const char *what) {
  if (!progress.on)
    return;
  double f = progress.total > 0 ? progress.done / progress.total : 1.0;
  if (f > 1)
    f = 1;
  int width = 30, filled = (int)(f * width + 0.5);
  char bar[64];
  for (int i = 0; i < width; i++)
    bar[i] = i < filled ? '#' : '.';
  bar[width] = '\0';
  fprintf(stderr, "\r\033[K[%s] %3d%%  %s", bar, (int)(f * 100 + 0.5), what);
  fflush(stderr);
}

static void progress_end(void) {
  if (progress.on) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
  }
}

/* ---- timing --------------------------------------------------------------------------------- */

typedef struct measurement {
  double ms;       /* median, synchronized */
  double naive_ms; /* median, read before synchronizing */
  int runs;        /* timed runs taken */
} measurement;

typedef void (*work_fn)(void *ctx);

/* Times work() on dev: one warm-up, then up to runs timed runs, each one starting with dev idle
 * and ending when dev has finished (clt_device_synchronize before the clock is read). The first
 * timed run sets how many follow: one run of more than SLOW_RUN_MS is enough, and otherwise no
 * more than about SIZE_BUDGET_MS is spent. sync may be NULL to wait for every device. */
static measurement measure(clt_device *sync, work_fn work, void (*after)(void *), void *ctx,
                           int runs) {
  double t[1000], naive[1000];
  CHECK(clt_device_synchronize(sync));
  work(ctx); /* warm-up: builds kernels, fills the allocator's cache */
  CHECK(clt_device_synchronize(sync));
  if (after != NULL)
    after(ctx);
  int n = 0, want = runs;
  while (n < want) {
    CHECK(clt_device_synchronize(sync)); /* nothing earlier is counted */
    double t0 = now_ms();
    work(ctx);
    naive[n] = now_ms() - t0;            /* wrong: the device may still be working */
    CHECK(clt_device_synchronize(sync)); /* right: the work has finished */
    t[n] = now_ms() - t0;
    if (after != NULL)
      after(ctx);
    if (n == 0) {
      if (t[0] > SLOW_RUN_MS)
        want = 1;
      else if (t[0] * want > SIZE_BUDGET_MS)
        want = (int)(SIZE_BUDGET_MS / t[0]) > 1 ? (int)(SIZE_BUDGET_MS / t[0]) : 1;
    }
    n++;
  }
  measurement m = {median(t, n), median(naive, n), n};
  return m;
}

/* ---- the work ------------------------------------------------------------------------------ */

typedef struct binary_ctx {
  clt_tensor *a, *b, *out;
  int matmul; /* 1: clt_matmul into a new out; 0: clt_add_out into out */
} binary_ctx;

static void run_binary(void *p) {
  binary_ctx *c = p;
  if (c->matmul)
    CHECK(clt_matmul(c->a, c->b, &c->out));
  else
    CHECK(clt_add_out(c->a, c->b, c->out));
}

static void release_matmul_out(void *p) {
  binary_ctx *c = p;
  if (c->matmul) {
    clt_tensor_release(c->out);
    c->out = NULL;
  }
}

typedef struct copy_ctx {
  clt_tensor *dst, *src;
} copy_ctx;

static void run_copy(void *p) {
  copy_ctx *c = p;
  CHECK(clt_copy(c->dst, c->src));
}

/* ---- options ---------------------------------------------------------------------------- */

enum what { WHAT_MATMUL, WHAT_TRANSFER, WHAT_ELEMENTWISE };

typedef struct options {
  enum what what;
  const char *device, *csv, *plot;
  int64_t sizes[MAX_SIZES];
  int nsizes;
  int runs, naive;
} options;

/* Parses "50,100,2K" into o->sizes, sorted ascending without repeats. */
static void parse_sizes(options *o, const char *arg) {
  const char *p = arg;
  o->nsizes = 0;
  while (*p != '\0') {
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno != 0 || v <= 0)
      usage_error("--sizes: '%s' is not a list of positive integers", arg);
    if (*end == 'K' || *end == 'k')
      v *= 1024, end++;
    else if (*end == 'M' || *end == 'm')
      v *= 1024 * 1024, end++;
    if (*end != ',' && *end != '\0')
      usage_error("--sizes: '%s' is not a list of positive integers", arg);
    if (o->nsizes == MAX_SIZES)
      usage_error("--sizes: at most %d sizes", MAX_SIZES);
    if (v > ((int64_t)1 << 40))
      usage_error("--sizes: %lld is too large", v);
    o->sizes[o->nsizes++] = v;
    p = *end == ',' ? end + 1 : end;
  }
  if (o->nsizes == 0)
    usage_error("--sizes: empty list");
  for (int i = 1; i < o->nsizes; i++) /* insertion sort, then drop repeats */
    for (int j = i; j > 0 && o->sizes[j - 1] > o->sizes[j]; j--) {
      int64_t t = o->sizes[j];
      o->sizes[j] = o->sizes[j - 1];
      o->sizes[j - 1] = t;
    }
  int k = 1;
  for (int i = 1; i < o->nsizes; i++)
    if (o->sizes[i] != o->sizes[k - 1])
      o->sizes[k++] = o->sizes[i];
  o->nsizes = k;
}

/* The value of option argv[*i] ("--opt VALUE" or "--opt=VALUE"), or NULL if argv[*i] is not
 * opt. */
static const char *option_value(int argc, char **argv, int *i, const char *opt) {
  size_t len = strlen(opt);
  if (strncmp(argv[*i], opt, len) != 0)
    return NULL;
  if (argv[*i][len] == '=')
    return argv[*i] + len + 1;
  if (argv[*i][len] != '\0')
    return NULL;
  if (*i + 1 >= argc)
    usage_error("option '%s' needs a value", opt);
  return argv[++*i];
}

static void parse_options(int argc, char **argv, options *o) {
  static const int64_t default_matmul[] = {50, 100, 200, 400, 800, 1000, 1600, 2000, 3000, 4000};
  memset(o, 0, sizeof *o);
  o->runs = 5;
  const char *sizes = NULL, *v;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
      printf("clt-bench (clt) %s\n", clt_version());
      exit(0);
    } else if (strcmp(argv[i], "--naive") == 0) {
      o->naive = 1;
    } else if ((v = option_value(argc, argv, &i, "--what")) != NULL) {
      if (strcmp(v, "matmul") == 0)
        o->what = WHAT_MATMUL;
      else if (strcmp(v, "transfer") == 0)
        o->what = WHAT_TRANSFER;
      else if (strcmp(v, "elementwise") == 0)
        o->what = WHAT_ELEMENTWISE;
      else
        usage_error("--what: '%s' is not one of matmul, transfer, elementwise", v);
    } else if ((v = option_value(argc, argv, &i, "--device")) != NULL) {
      o->device = v;
    } else if ((v = option_value(argc, argv, &i, "--sizes")) != NULL) {
      sizes = v;
    } else if ((v = option_value(argc, argv, &i, "--runs")) != NULL) {
      char *end;
      errno = 0;
      long r = strtol(v, &end, 10);
      if (end == v || *end != '\0' || errno != 0 || r < 1 || r > 1000)
        usage_error("--runs: '%s' is not a number from 1 to 1000", v);
      o->runs = (int)r;
    } else if ((v = option_value(argc, argv, &i, "--csv")) != NULL) {
      o->csv = v;
    } else if ((v = option_value(argc, argv, &i, "--plot")) != NULL) {
      o->plot = v;
    } else {
      usage_error("%s '%s'", argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i]);
    }
  }
  if (sizes != NULL) {
    parse_sizes(o, sizes);
    if (o->what == WHAT_MATMUL && o->sizes[o->nsizes - 1] > 100000)
      usage_error("--sizes: n = %lld is too large for matmul", (long long)o->sizes[o->nsizes - 1]);
  } else if (o->what == WHAT_MATMUL) {
    o->nsizes = (int)(sizeof default_matmul / sizeof default_matmul[0]);
    memcpy(o->sizes, default_matmul, sizeof default_matmul);
  } else {
    /* 4 KiB to 64 MiB of f32 per tensor */
    static const int64_t def[] = {1 << 10, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24};
    o->nsizes = (int)(sizeof def / sizeof def[0]);
    memcpy(o->sizes, def, sizeof def);
  }
}

/* The device to compare with cpu: --device, else the default device, else cl:0. */
static clt_device *pick_device(const options *o) {
  clt_device *dev;
  if (o->device != NULL) {
    if (clt_device_get(o->device, &dev) != CLT_OK) {
      fprintf(stderr, "%s: unknown device '%s': %s\n", program, o->device, clt_last_error());
      exit(2);
    }
    return dev;
  }
  dev = clt_device_default();
  if (clt_device_is_host(dev) && clt_device_count() > 0) {
    dev = clt_device_at(0);
    if (dev == NULL)
      die("cl:0: %s", clt_last_error());
  }
  return dev;
}

/* ---- SVG plot -------------------------------------------------------------------------------- */

typedef struct series {
  const char *id, *label, *color;
  int dashed, square;
  double x[MAX_SIZES], y[MAX_SIZES];
  int n;
} series;

typedef struct plot {
  const char *title, *subtitle, *xlabel, *ylabel;
  int xbytes, ybytes; /* tick labels in bytes (B, kB, MB, GB) */
  double crossover;   /* x of the crossover, or 0 for none */
  const char *cross_label;
  series s[MAX_SERIES];
  int ns;
} plot;

static void xml_text(FILE *f, const char *s) {
  for (; *s != '\0'; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '>')
      fputs("&gt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else if (*s == '"')
      fputs("&quot;", f);
    else if ((unsigned char)*s >= 0x20 || *s == '\t')
      fputc(*s, f);
  }
}

/* A tick label: 0.05, 2, 1000, 20k, 5M; with bytes: 100 B, 10 kB, 1 MB (powers of 1000). */
static void tick_label(char *buf, size_t size, double v, int bytes) {
  static const char *si[] = {"", "k", "M", "G", "T"};
  int k = 0;
  double s = v;
  double limit = bytes ? 1000 : 10000;
  if (v >= limit)
    while (s >= 999.5 && k < 4)
      s /= 1000, k++;
  /* tick values are m * 10^k: whole numbers print without an exponent, fractions as %g does */
  snprintf(buf, size, s >= 1 ? "%.0f%s%s%s" : "%.3g%s%s%s", s, bytes ? " " : "", si[k],
           bytes ? "B" : "");
}

typedef struct log_axis {
  double lo, hi; /* the axis range (data range, padded) */
  double p0, p1; /* pixels of lo and hi */
} log_axis;

static double axis_px(const log_axis *a, double v) {
  return a->p0 + (a->p1 - a->p0) * (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
}

static void axis_range(log_axis *a, double lo, double hi) {
  if (!(lo > 0))
    lo = hi > 0 ? hi / 10 : 1;
  if (!(hi > 0))
    hi = lo * 10;
  double span = log10(hi) - log10(lo);
  double pad = span < 0.5 ? (1.0 - span) / 2 : span * 0.06;
  a->lo = pow(10, log10(lo) - pad);
  a->hi = pow(10, log10(hi) + pad);
}

/* Grid lines and labelled ticks of one log axis. Labels at 1, 2, 5 x 10^k when the axis spans
 * up to three decades, at 10^k otherwise; unlabelled minor lines at the other integers. */
static void draw_ticks(FILE *f, const log_axis *a, const log_axis *other, int vertical, int bytes) {
  int d0 = (int)floor(log10(a->lo)), d1 = (int)ceil(log10(a->hi));
  int fine = d1 - d0 <= 3 + (log10(a->hi) - log10(a->lo) < 2.5);
  for (int d = d0; d <= d1; d++)
    for (int m = 1; m <= 9; m++) {
      double v = m * pow(10, d);
      if (v < a->lo * 0.9999 || v > a->hi * 1.0001)
        continue;
      int labelled = m == 1 || (fine && (m == 2 || m == 5));
      double p = axis_px(a, v);
      char lab[32];
      tick_label(lab, sizeof lab, v, bytes);
      if (vertical) { /* an x tick: a vertical grid line */
        fprintf(f, "<line class=\"grid%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                labelled ? "" : " minor", p, other->p0, p, other->p1);
        if (labelled)
          fprintf(f,
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                  p, other->p0 + 20, lab);
      } else {
        fprintf(f, "<line class=\"grid%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                labelled ? "" : " minor", other->p0, p, other->p1, p);
        if (labelled)
          fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                  other->p0 - 8, p + 4, lab);
      }
    }
}

static int write_plot(const char *path, const plot *pl) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  const double W = 860, H = 560, L = 90, R = 30, T = 78, B = 70;
  double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
  for (int i = 0; i < pl->ns; i++)
    for (int j = 0; j < pl->s[i].n; j++) {
      double x = pl->s[i].x[j], y = pl->s[i].y[j];
      if (!(x > 0) || !(y > 0) || !isfinite(y))
        continue;
      xmin = fmin(xmin, x), xmax = fmax(xmax, x);
      ymin = fmin(ymin, y), ymax = fmax(ymax, y);
    }
  log_axis ax = {0, 0, L, W - R}, ay = {0, 0, H - B, T};
  axis_range(&ax, xmin, xmax);
  axis_range(&ay, ymin, ymax);

  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
          W, H, W, H);
  fprintf(f, "<style>\n"
             ".grid { stroke: #c8c8c8; stroke-width: 1; }\n"
             ".grid.minor { stroke: #ececec; }\n"
             ".tick { font-size: 13px; fill: #333; }\n"
             ".axis { stroke: #222; stroke-width: 1.5; fill: none; }\n"
             ".label { font-size: 15px; fill: #111; }\n"
             ".title { font-size: 19px; font-weight: bold; fill: #111; }\n"
             ".subtitle { font-size: 13px; fill: #555; }\n"
             ".series { fill: none; stroke-width: 2.5; stroke-linejoin: round; }\n"
             ".legend { font-size: 14px; fill: #111; }\n"
             ".cross { stroke: #2a7d2a; stroke-width: 2; stroke-dasharray: 7 5; }\n"
             ".crosstext { font-size: 14px; fill: #2a7d2a; font-weight: bold; }\n"
             "</style>\n");
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text class=\"title\" x=\"%.0f\" y=\"28\">", L);
  xml_text(f, pl->title);
  fprintf(f, "</text>\n<text class=\"subtitle\" x=\"%.0f\" y=\"50\">", L);
  xml_text(f, pl->subtitle);
  fprintf(f, "</text>\n");

  if (pl->crossover > 0) { /* the device's side, lightly shaded */
    double px = axis_px(&ax, pl->crossover);
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#2a7d2a\" "
            "fill-opacity=\"0.07\"/>\n",
            px, ay.p1, ax.p1 - px, ay.p0 - ay.p1);
  }
  draw_ticks(f, &ax, &ay, 1, pl->xbytes);
  draw_ticks(f, &ay, &ax, 0, pl->ybytes);
  fprintf(f, "<rect class=\"axis\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", ax.p0,
          ay.p1, ax.p1 - ax.p0, ay.p0 - ay.p1);
  fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
          (ax.p0 + ax.p1) / 2, H - 22);
  xml_text(f, pl->xlabel);
  fprintf(f,
          "</text>\n<text class=\"label\" transform=\"translate(24 %.1f) rotate(-90)\" "
          "text-anchor=\"middle\">",
          (ay.p0 + ay.p1) / 2);
  xml_text(f, pl->ylabel);
  fprintf(f, "</text>\n");

  if (pl->crossover > 0) {
    double px = axis_px(&ax, pl->crossover);
    fprintf(f, "<line class=\"cross\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", px,
            ay.p0, px, ay.p1);
    int right = px < (ax.p0 + ax.p1) / 2;
    fprintf(f, "<text class=\"crosstext\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">",
            px + (right ? 6 : -6), ay.p0 - 10, right ? "start" : "end");
    xml_text(f, pl->cross_label);
    fprintf(f, "</text>\n");
  }

  for (int i = 0; i < pl->ns; i++) {
    const series *s = &pl->s[i];
    fprintf(f, "<path id=\"%s\" class=\"series\" stroke=\"%s\"%s d=\"", s->id, s->color,
            s->dashed ? " stroke-dasharray=\"8 5\"" : "");
    int first = 1;
    for (int j = 0; j < s->n; j++) {
      if (!(s->x[j] > 0) || !(s->y[j] > 0) || !isfinite(s->y[j]))
        continue;
      fprintf(f, "%s%.1f %.1f", first ? "M" : " L", axis_px(&ax, s->x[j]), axis_px(&ay, s->y[j]));
      first = 0;
    }
    fprintf(f, "\"/>\n<g fill=\"%s\">\n", s->color);
    for (int j = 0; j < s->n; j++) {
      if (!(s->x[j] > 0) || !(s->y[j] > 0) || !isfinite(s->y[j]))
        continue;
      double px = axis_px(&ax, s->x[j]), py = axis_px(&ay, s->y[j]);
      if (s->square)
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\"/>\n", px - 4.5, py - 4.5);
      else
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\"/>\n", px, py);
    }
    fprintf(f, "</g>\n");
  }

  /* The legend, in the plot corner with the fewest points under it. */
  double lw = 20, lh = 12 + 24.0 * pl->ns;
  for (int i = 0; i < pl->ns; i++)
    lw = fmax(lw, 62 + 7.8 * (double)strlen(pl->s[i].label));
  double best_x = 0, best_y = 0;
  int best = -1;
  for (int c = 0; c < 4; c++) {
    double x0 = c % 2 ? ax.p1 - 12 - lw : ax.p0 + 12, y0 = c / 2 ? ay.p0 - 12 - lh : ay.p1 + 12;
    int hits = 0;
    for (int i = 0; i < pl->ns; i++)
      for (int j = 0; j < pl->s[i].n; j++) {
        if (!(pl->s[i].x[j] > 0) || !(pl->s[i].y[j] > 0))
          continue;
        double px = axis_px(&ax, pl->s[i].x[j]), py = axis_px(&ay, pl->s[i].y[j]);
        hits += px > x0 - 10 && px < x0 + lw + 10 && py > y0 - 10 && py < y0 + lh + 10;
      }
    if (best < 0 || hits < best)
      best = hits, best_x = x0, best_y = y0;
  }
  fprintf(f,
          "<g id=\"legend\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
          "fill=\"white\" fill-opacity=\"0.92\" stroke=\"#999\"/>\n",
          best_x, best_y, lw, lh);
  for (int i = 0; i < pl->ns; i++) {
    const series *s = &pl->s[i];
    double y = best_y + 18 + 24.0 * i;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2.5\"%s/>\n",
            best_x + 10, y, best_x + 46, y, s->color, s->dashed ? " stroke-dasharray=\"8 5\"" : "");
    if (s->square)
      fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\" fill=\"%s\"/>\n",
              best_x + 23.5, y - 4.5, s->color);
    else
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", best_x + 28, y,
              s->color);
    fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">", best_x + 56, y + 5);
    xml_text(f, s->label);
    fprintf(f, "</text>\n");
  }
  fprintf(f, "</g>\n</svg>\n");
  int bad = ferror(f);
  if (fclose(f) != 0 || bad)
    return -1;
  return 0;
}

/* ---- output files ---------------------------------------------------------------------------- */

static FILE *open_csv(const char *path) {
  if (path == NULL)
    return NULL;
  fflush(stdout); /* the table first, then the messages about files */
  FILE *f = fopen(path, "w");
  if (f == NULL)
    die("cannot write '%s': %s", path, strerror(errno));
  return f;
}

static void close_csv(FILE *f, const char *path) {
  if (f == NULL)
    return;
  int bad = ferror(f);
  if (fclose(f) != 0 || bad)
    die("error writing '%s'", path);
  fprintf(stderr, "%s: wrote %s\n", program, path);
}

static void save_plot(const char *path, const plot *pl) {
  if (path == NULL)
    return;
  fflush(stdout);
  if (write_plot(path, pl) != 0)
    die("cannot write '%s': %s", path, strerror(errno));
  fprintf(stderr, "%s: wrote %s\n", program, path);
}

/* ---- matmul and elementwise: cpu against the device ------------------------------------- */

static void describe(clt_device *d, int matmul) {
  const char *path = matmul ? clt_matmul_path(d) : NULL;
  printf("  %-5s %s", clt_device_name(d), clt_device_description(d));
  if (path != NULL)
    printf(" (matmul: %s)", path);
  printf("\n");
}

/* One (cpu, device) comparison for each size: matmul of (n, n) matrices, or clt_add of n
 * elements. */
static int compare(const options *o, clt_device *dev) {
  int matmul = o->what == WHAT_MATMUL;
  clt_device *devs[2] = {clt_cpu(), dev};
  const char *dname = clt_device_name(dev);
  measurement m[MAX_SIZES][2];
  double rate[MAX_SIZES][2];

  printf("clt-bench: %s, cpu against %s\n",
         matmul ? "matmul of random (n, n) f32 matrices"
                : "clt_add of two random f32 vectors "
                  "of n elements",
         dname);
  describe(devs[0], matmul);
  describe(devs[1], matmul);
  printf("  each time: the median of up to %d run%s after a warm-up, the device synchronized "
         "before the clock is read\n\n",
         o->runs, o->runs == 1 ? "" : "s");

  progress.total = 0;
  for (int i = 0; i < o->nsizes; i++) {
    double n = (double)o->sizes[i];
    progress.total += 2 * (matmul ? n * n * n : n);
  }

  CHECK(clt_manual_seed(1));
  for (int i = 0; i < o->nsizes; i++) {
    int64_t n = o->sizes[i];
    double work = matmul ? (double)n * n * n : (double)n;
    for (int d = 0; d < 2; d++) {
      char what[96];
      snprintf(what, sizeof what, "%s n=%lld on %s", matmul ? "matmul" : "add", (long long)n,
               clt_device_name(devs[d]));
      progress_show(what);
      int64_t shape[2] = {n, n};
      int ndim = matmul ? 2 : 1;
      binary_ctx c = {NULL, NULL, NULL, matmul};
      CHECK(clt_rand(CLT_F32, ndim, shape, devs[d], &c.a));
      CHECK(clt_rand(CLT_F32, ndim, shape, devs[d], &c.b));
      if (!matmul)
        CHECK(clt_empty(CLT_F32, ndim, shape, devs[d], &c.out));
      m[i][d] = measure(devs[d], run_binary, release_matmul_out, &c, o->runs);
      clt_tensor_release(c.a);
      clt_tensor_release(c.b);
      clt_tensor_release(c.out);
      /* GFLOP/s: 2 n^3 flops; GB/s: two reads and a write of n f32 */
      rate[i][d] = matmul ? 2.0 * work / (m[i][d].ms * 1e6) : 12.0 * work / (m[i][d].ms * 1e6);
      progress.done += work;
    }
  }
  progress_end();

  /* The crossover: the smallest size from which the device is faster at every larger size. */
  int cross = o->nsizes, device_wins = 0;
  for (int i = o->nsizes - 1; i >= 0 && m[i][1].ms < m[i][0].ms; i--)
    cross = i;
  for (int i = 0; i < o->nsizes; i++)
    device_wins += m[i][1].ms < m[i][0].ms;

  const char *unit = matmul ? "GFLOP/s" : "GB/s";
  int wd = (int)strlen(dname) + 3 > 10 ? (int)strlen(dname) + 3 : 10;
  char h1[64], h2[64], h3[64];
  snprintf(h1, sizeof h1, "%s ms", dname);
  snprintf(h2, sizeof h2, "%s %s", dname, unit);
  snprintf(h3, sizeof h3, "%s no-sync", dname);
  printf("%9s %10s %12s %*s %*s", "n", "cpu ms", matmul ? "cpu GFLOP/s" : "cpu GB/s", wd, h1,
         wd + 5, h2);
  if (o->naive)
    printf(" %*s", wd + 5, h3);
  printf("  %-8s %8s %6s\n", "faster", "by", "runs");
  for (int i = 0; i < o->nsizes; i++) {
    int dw = m[i][1].ms < m[i][0].ms;
    double by = dw ? m[i][0].ms / m[i][1].ms : m[i][1].ms / m[i][0].ms;
    printf("%9lld", (long long)o->sizes[i]);
    print_fixed(10, m[i][0].ms);
    print_fixed(12, rate[i][0]);
    print_fixed(wd, m[i][1].ms);
    print_fixed(wd + 5, rate[i][1]);
    if (o->naive)
      print_fixed(wd + 5, m[i][1].naive_ms);
    printf("  %-8s %7.2fx %3d/%d\n", dw ? dname : "cpu", by, m[i][0].runs, m[i][1].runs);
  }
  printf("\n");
  char cross_label[128] = "";
  if (cross == 0)
    printf("crossover: none: %s is faster at every size measured (it always wins, from n = %lld)\n",
           dname, (long long)o->sizes[0]);
  else if (cross == o->nsizes && device_wins == 0)
    printf("crossover: none: the device never wins (cpu is faster at every size measured)\n");
  else if (cross == o->nsizes)
    printf("crossover: none: the device never wins for good (cpu is faster at n = %lld, the "
           "largest size measured)\n",
           (long long)o->sizes[o->nsizes - 1]);
  else
    printf("crossover: n = %lld: %s is faster from there on, at every larger size measured\n",
           (long long)o->sizes[cross], dname);
  /* Where the two lines meet in the plot: between the last size the device loses and the first
   * one from which it wins, interpolated on the log-log axes. */
  double cross_x = 0;
  if (cross > 0 && cross < o->nsizes) {
    double x0 = log((double)o->sizes[cross - 1]), x1 = log((double)o->sizes[cross]);
    double d0 = log(m[cross - 1][1].ms / m[cross - 1][0].ms);
    double d1 = log(m[cross][1].ms / m[cross][0].ms);
    cross_x = exp(d0 != d1 ? x0 + (x1 - x0) * d0 / (d0 - d1) : x1);
    double r = pow(10, floor(log10(cross_x)) - 1); /* two significant digits: an estimate */
    snprintf(cross_label, sizeof cross_label, "crossover n \xe2\x89\x88 %.0f",
             round(cross_x / r) * r);
  }
  if (o->naive)
    printf("(the no-sync column reads the clock before the device has finished: it measures "
           "the enqueue, not the work)\n");

  FILE *csv = open_csv(o->csv);
  if (csv != NULL) {
    fprintf(csv, "n,device,cpu_ms,cpu_%s,device_ms,device_%s,faster,cpu_runs,device_runs%s\n",
            matmul ? "gflops" : "gbps", matmul ? "gflops" : "gbps",
            o->naive ? ",device_nosync_ms" : "");
    for (int i = 0; i < o->nsizes; i++) {
      fprintf(csv, "%lld,%s,%.6f,%.4f,%.6f,%.4f,%s,%d,%d", (long long)o->sizes[i], dname,
              m[i][0].ms, rate[i][0], m[i][1].ms, rate[i][1],
              m[i][1].ms < m[i][0].ms ? "device" : "cpu", m[i][0].runs, m[i][1].runs);
      if (o->naive)
        fprintf(csv, ",%.6f", m[i][1].naive_ms);
      fprintf(csv, "\n");
    }
    close_csv(csv, o->csv);
  }

  if (o->plot != NULL) {
    static plot pl;
    char title[160], sub[256], lab0[96], lab1[160];
    snprintf(title, sizeof title, "%s: cpu vs %s (lower is faster)",
             matmul ? "Matrix product of (n, n) f32 matrices" : "clt_add of n f32 elements", dname);
    if (cross == 0)
      snprintf(sub, sizeof sub,
               "%s is faster at every size. Median of up to %d runs, synchronized.", dname,
               o->runs);
    else if (cross == o->nsizes)
      snprintf(sub, sizeof sub,
               "The device never wins for good: cpu is faster at the largest size. Median of up "
               "to %d runs, synchronized.",
               o->runs);
    else
      snprintf(sub, sizeof sub,
               "Shaded: %s is faster from n = %lld on. Median of up to %d runs, synchronized.",
               dname, (long long)o->sizes[cross], o->runs);
    const char *p0 = matmul ? clt_matmul_path(devs[0]) : NULL;
    const char *p1 = matmul ? clt_matmul_path(devs[1]) : NULL;
    snprintf(lab0, sizeof lab0, "cpu (host%s%s)", p0 ? ", " : "", p0 ? p0 : "");
    clt_device_info info;
    CHECK(clt_device_info_get(dev, &info));
    snprintf(lab1, sizeof lab1, "%s (%s%s%s%s%s)", dname, info.kind_name,
             info.platform && *info.platform ? ", " : "", info.platform ? info.platform : "",
             p1 ? ", " : "", p1 ? p1 : "");
    pl.title = title;
    pl.subtitle = sub;
    pl.xlabel =
        matmul ? "matrix size n (n \xc3\x97 n, log scale)" : "elements per tensor n (log scale)";
    pl.ylabel = matmul ? "time per product, ms (log scale)" : "time per add, ms (log scale)";
    pl.crossover = cross_x;
    pl.cross_label = cross_label;
    pl.ns = 2;
    for (int d = 0; d < 2; d++) {
      series *s = &pl.s[d];
      s->id = d == 0 ? "series-cpu" : "series-device";
      s->label = d == 0 ? lab0 : lab1;
      s->color = d == 0 ? "#1f5fbf" : "#d9541e";
      s->square = d == 1;
      s->n = o->nsizes;
      for (int i = 0; i < o->nsizes; i++) {
        s->x[i] = (double)o->sizes[i];
        s->y[i] = m[i][d].ms;
      }
    }
    save_plot(o->plot, &pl);
  }
  return 0;
}

/* ---- transfer bandwidth ------------------------------------------------------------------- */

enum { H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, D2H_PINNED, D2D, NKINDS };

static int transfer(const options *o, clt_device *dev) {
  static const char *names[NKINDS] = {"H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned",
                                      "D2D"};
  static const char *ids[NKINDS] = {"series-h2d-pageable", "series-h2d-pinned",
                                    "series-d2h-pageable", "series-d2h-pinned", "series-d2d"};
  if (clt_device_is_host(dev)) {
    fprintf(stderr, "%s: --what transfer needs an OpenCL device, and %s is the host\n", program,
            clt_device_name(dev));
    return 2;
  }
  clt_device *peer = NULL; /* the next OpenCL device, for D2D */
  for (int i = 0; i < clt_device_count() && peer == NULL; i++) {
    clt_device *d = clt_device_at(i);
    if (d != NULL && d != dev)
      peer = d;
  }
  int nk = peer != NULL ? NKINDS : D2D;
  double gbs[MAX_SIZES][NKINDS];
  measurement m[MAX_SIZES][NKINDS];

  printf("clt-bench: transfer bandwidth between cpu and %s%s%s, f32 tensors\n",
         clt_device_name(dev), peer ? " and from it to " : "", peer ? clt_device_name(peer) : "");
  describe(dev, 0);
  if (peer != NULL)
    describe(peer, 0);
  else
    printf("  (one OpenCL device only: no D2D column)\n");
  printf("  each time: the median of up to %d clt_copy runs after a warm-up, the devices "
         "synchronized before the clock is read; GB/s = 10^9 bytes/s\n\n",
         o->runs);

  progress.total = 0;
  for (int i = 0; i < o->nsizes; i++)
    progress.total += (double)o->sizes[i] * nk;

  for (int i = 0; i < o->nsizes; i++) {
    int64_t n = o->sizes[i];
    clt_tensor *pageable, *pinned, *on_dev, *on_peer = NULL;
    CHECK(clt_zeros(CLT_F32, 1, &n, clt_cpu(), &pageable));
    CHECK(clt_empty_pinned(CLT_F32, 1, &n, dev, &pinned));
    CHECK(clt_copy(pinned, pageable));
    CHECK(clt_zeros(CLT_F32, 1, &n, dev, &on_dev));
    if (peer != NULL)
      CHECK(clt_zeros(CLT_F32, 1, &n, peer, &on_peer));
    CHECK(clt_device_synchronize(NULL));
    copy_ctx cases[NKINDS] = {{on_dev, pageable},
                              {on_dev, pinned},
                              {pageable, on_dev},
                              {pinned, on_dev},
                              {on_peer, on_dev}};
    for (int k = 0; k < nk; k++) {
      char what[96];
      snprintf(what, sizeof what, "%s, %lld bytes", names[k], (long long)n * 4);
      progress_show(what);
      m[i][k] = measure(NULL, run_copy, NULL, &cases[k], o->runs);
      gbs[i][k] = (double)n * 4 / (m[i][k].ms * 1e6);
      progress.done += (double)n;
    }
    clt_tensor_release(pageable);
    clt_tensor_release(pinned);
    clt_tensor_release(on_dev);
    clt_tensor_release(on_peer);
  }
  progress_end();

  printf("%12s", "bytes");
  for (int k = 0; k < nk; k++)
    printf(" %13s", names[k]);
  printf("   (GB/s)\n");
  for (int i = 0; i < o->nsizes; i++) {
    printf("%12lld", (long long)o->sizes[i] * 4);
    for (int k = 0; k < nk; k++)
      printf(" %13.3f", gbs[i][k]);
    printf("\n");
  }

  FILE *csv = open_csv(o->csv);
  if (csv != NULL) {
    fprintf(csv,
            "bytes,device,h2d_pageable_gbps,h2d_pinned_gbps,d2h_pageable_gbps,"
            "d2h_pinned_gbps%s\n",
            peer ? ",d2d_gbps" : "");
    for (int i = 0; i < o->nsizes; i++) {
      fprintf(csv, "%lld,%s", (long long)o->sizes[i] * 4, clt_device_name(dev));
      for (int k = 0; k < nk; k++)
        fprintf(csv, ",%.4f", gbs[i][k]);
      fprintf(csv, "\n");
    }
    close_csv(csv, o->csv);
  }

  if (o->plot != NULL) {
    static plot pl;
    static const char *colors[NKINDS] = {"#1f5fbf", "#1f5fbf", "#d9541e", "#d9541e", "#2a7d2a"};
    char title[128], labels[NKINDS][96];
    snprintf(title, sizeof title, "Transfer bandwidth: cpu and %s (higher is faster)",
             clt_device_name(dev));
    pl.title = title;
    pl.subtitle = "clt_copy of f32 tensors. Dashed: pageable host memory; solid: pinned.";
    pl.xlabel = "bytes per copy (log scale)";
    pl.ylabel = "bandwidth, GB/s (log scale)";
    pl.xbytes = 1;
    pl.crossover = 0;
    pl.ns = nk;
    for (int k = 0; k < nk; k++) {
      series *s = &pl.s[k];
      if (k == D2D)
        snprintf(labels[k], sizeof labels[k], "D2D %s \xe2\x86\x92 %s", clt_device_name(dev),
                 clt_device_name(peer));
      else
        snprintf(labels[k], sizeof labels[k], "%s", names[k]);
      s->id = ids[k];
      s->label = labels[k];
      s->color = colors[k];
      s->dashed = k == H2D_PAGEABLE || k == D2H_PAGEABLE;
      s->square = k == D2H_PAGEABLE || k == D2H_PINNED;
      s->n = o->nsizes;
      for (int i = 0; i < o->nsizes; i++) {
        s->x[i] = (double)o->sizes[i] * 4;
        s->y[i] = gbs[i][k];
      }
    }
    save_plot(o->plot, &pl);
  }
  return 0;
}

int main(int argc, char **argv) {
  options o;
  parse_options(argc, argv, &o);
  clt_device *dev = pick_device(&o);
  if (clt_device_is_host(dev) && o.what != WHAT_TRANSFER)
    fprintf(stderr, "%s: warning: no OpenCL device: comparing cpu with itself\n", program);
  progress.on = isatty(STDERR_FILENO);
  int rc = o.what == WHAT_TRANSFER ? transfer(&o, dev) : compare(&o, dev);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: error writing the output\n", program);
    return 1;
  }
  return rc;
}
