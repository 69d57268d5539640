/* SPDX-License-Identifier: MIT */
/* safetensors_json.c - the small JSON parser of clt_load: strings (escapes decoded, UTF-8
 * checked), non-negative integers, objects of strings (__metadata__, an index's weight_map),
 * skipping any value, and the loader's format errors. It accepts what safetensors headers and
 * model.safetensors.index.json files hold; the header's own grammar is in safetensors.c. */
#include "safetensors-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

clt_status clt__st_fmt_error(const parser *p, const char *tensor, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (tensor)
    return clt__error(CLT_ERR_FORMAT, "clt_load", "%s: tensor '%.200s': %s", p->path, tensor, why);
  return clt__error(CLT_ERR_FORMAT, "clt_load", "%s: %s", p->path, why);
}

clt_status clt__st_oom(const parser *p) {
  return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "%s: out of host memory", p->path);
}

clt_status clt__st_syntax(const parser *p, const char *what) {
  return clt__st_fmt_error(p, NULL, "bad JSON in the header at byte %zu: %s", p->pos, what);
}

static int hex4(const unsigned char *s) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = s[i], d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return -1;
    v = v * 16 + d;
  }
  return v;
}

static size_t utf8_put(unsigned char *o, uint32_t cp) {
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xc0 | (cp >> 6));
    o[1] = (unsigned char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xe0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (unsigned char)(0xf0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A JSON string, decoded into a new NUL-terminated buffer; valid UTF-8 without NUL. */
clt_status clt__st_parse_string(parser *p, const char *what, char **out) {
  if (!eat(p, '"'))
    return clt__st_syntax(p, what);
  size_t start = p->pos, end = start;
  while (end < p->n && p->s[end] != '"')
    end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->n)
    return clt__st_syntax(p, "a string runs past the end of the header");
  unsigned char *o = malloc(end - start + 1); /* decoding never lengthens */
  if (!o)
    return clt__st_oom(p);
  size_t k = 0;
  const unsigned char *s = p->s;
  for (size_t i = start; i < end;) {
    unsigned char c = s[i];
    if (c < 0x20) {
      free(o);
      p->pos = i;
      return clt__st_syntax(p, "a control character inside a string");
    }
    if (c != '\\') {
      o[k++] = c;
      i++;
      continue;
    }
    unsigned char e = s[i + 1];
    i += 2;
    const char *plain = strchr("\"\\/bfnrt", e);
    if (e && plain) {
      static const char map[] = "\"\\/\b\f\n\r\t";
      o[k++] = (unsigned char)map[plain - "\"\\/bfnrt"];
      continue;
    }
    int u1 = e == 'u' && end - i >= 4 ? hex4(s + i) : -1;
    if (u1 < 0) {
      free(o);
      p->pos = i;
      return clt__st_syntax(p, "a bad escape sequence in a string");
    }
    i += 4;
    uint32_t cp = (uint32_t)u1;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      int u2 = end - i >= 6 && s[i] == '\\' && s[i + 1] == 'u' ? hex4(s + i + 2) : -1;
      if (u2 < 0xdc00 || u2 > 0xdfff) {
        free(o);
        p->pos = i;
        return clt__st_syntax(p, "an unpaired surrogate escape in a string");
      }
      cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)u2 - 0xdc00);
      i += 6;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      free(o);
      p->pos = i;
      return clt__st_syntax(p, "an unpaired surrogate escape in a string");
    }
    if (cp == 0) {
      free(o);
      p->pos = i;
      return clt__st_fmt_error(p, NULL,
                               "a string in the header contains a NUL character (\\u0000)");
    }
    k += utf8_put(o + k, cp);
  }
  p->pos = end + 1;
  o[k] = '\0';
  if (!clt__utf8_valid(o, k)) {
    free(o);
    return clt__st_fmt_error(p, NULL,
                             "a string in the header ending at byte %zu is not valid UTF-8", end);
  }
  *out = (char *)o;
  return CLT_OK;
}

/* A non-negative JSON integer that fits in int64_t. */
clt_status clt__st_parse_uint(parser *p, const char *tensor, const char *what, uint64_t *out) {
  ws(p);
  const unsigned char *s = p->s;
  if (p->pos < p->n && s[p->pos] == '-')
    return clt__st_fmt_error(p, tensor, "%s has a negative entry", what);
  if (p->pos >= p->n || s[p->pos] < '0' || s[p->pos] > '9')
    return clt__st_fmt_error(p, tensor, "%s must hold integers (bad JSON at byte %zu)", what,
                             p->pos);
  uint64_t v = 0;
  size_t start = p->pos;
  while (p->pos < p->n && s[p->pos] >= '0' && s[p->pos] <= '9') {
    if (v > (uint64_t)INT64_MAX / 10 || v * 10 + (uint64_t)(s[p->pos] - '0') > (uint64_t)INT64_MAX)
      return clt__st_fmt_error(p, tensor, "%s has an entry above 2^63 - 1", what);
    v = v * 10 + (uint64_t)(s[p->pos] - '0');
    p->pos++;
  }
  if (s[start] == '0' && p->pos - start > 1)
    return clt__st_fmt_error(p, tensor, "%s has a number with a leading zero", what);
  if (p->pos < p->n && (s[p->pos] == '.' || s[p->pos] == 'e' || s[p->pos] == 'E'))
    return clt__st_fmt_error(p, tensor, "%s must hold integers, not fractions or exponents", what);
  *out = v;
  return CLT_OK;
}

/* Skips one JSON value of any kind (the index's "metadata" and keys clt does not use). */
clt_status clt__st_skip_value(parser *p, int depth) {
  clt_status s;
  ws(p);
  if (depth > 64)
    return clt__st_fmt_error(p, NULL, "the JSON nests deeper than 64 levels");
  if (p->pos >= p->n)
    return clt__st_syntax(p, "expected a value");
  unsigned char c = p->s[p->pos];
  if (c == '"') {
    char *str;
    if ((s = clt__st_parse_string(p, "expected a string", &str)) != CLT_OK)
      return s;
    free(str);
    return CLT_OK;
  }
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    p->pos++;
    if (eat(p, close))
      return CLT_OK;
    do {
      if (c == '{') {
        char *key;
        if ((s = clt__st_parse_string(p, "expected a key", &key)) != CLT_OK)
          return s;
        free(key);
        if (!eat(p, ':'))
          return clt__st_syntax(p, "expected ':'");
      }
      if ((s = clt__st_skip_value(p, depth + 1)) != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, close))
      return clt__st_syntax(p, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
    return CLT_OK;
  }
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(words[i]);
    if (p->n - p->pos >= k && memcmp(p->s + p->pos, words[i], k) == 0) {
      p->pos += k;
      return CLT_OK;
    }
  }
  size_t start = p->pos;
  while (p->pos < p->n && p->s[p->pos] && strchr("0123456789+-.eE", p->s[p->pos]))
    p->pos++;
  return p->pos > start ? CLT_OK : clt__st_syntax(p, "expected a value");
}

/* What the JSON value at p's position is, for a message. */
static const char *value_kind(const parser *p) {
  if (p->pos >= p->n)
    return "nothing";
  switch (p->s[p->pos]) {
  case '{':
    return "an object";
  case '[':
    return "an array";
  case 't':
  case 'f':
    return "a boolean";
  case 'n':
    return "null";
  default:
    return (p->s[p->pos] >= '0' && p->s[p->pos] <= '9') || p->s[p->pos] == '-' ? "a number"
                                                                               : "not JSON";
  }
}

clt_status clt__st_parse_string_map(parser *p, const char *what, bool tensor_keys) {
  clt_status s;
  if (p->have_meta)
    return clt__st_fmt_error(p, NULL, "%s appears twice", what);
  p->have_meta = true;
  if (!eat(p, '{'))
    return clt__st_fmt_error(p, NULL, "%s must be an object of strings", what);
  if (eat(p, '}'))
    return CLT_OK;
  char expect[64];
  snprintf(expect, sizeof expect, "expected a key of %s", what);
  do {
    if (p->nm == p->mcap) {
      size_t cap = p->mcap ? 2 * p->mcap : 16;
      meta *m = realloc(p->m, cap * sizeof *m);
      if (!m)
        return clt__st_oom(p);
      p->m = m;
      p->mcap = cap;
    }
    meta *m = &p->m[p->nm];
    if ((s = clt__st_parse_string(p, expect, &m->key)) != CLT_OK)
      return s;
    if (!eat(p, ':')) {
      free(m->key);
      return clt__st_syntax(p, "expected ':'");
    }
    ws(p);
    if (p->pos >= p->n || p->s[p->pos] != '"') {
      if (tensor_keys)
        s = clt__st_fmt_error(p, m->key,
                              "its value in %s must be a string, the file name of its shard, "
                              "not %s (byte %zu)",
                              what, value_kind(p), p->pos);
      else
        s = clt__st_fmt_error(p, NULL,
                              "%s values must be strings, but the value of \"%.200s\" is %s "
                              "(byte %zu)",
                              what, m->key, value_kind(p), p->pos);
      free(m->key);
      return s;
    }
    if ((s = clt__st_parse_string(p, "expected a string", &m->value)) != CLT_OK) {
      free(m->key);
      return s;
    }
    p->nm++;
  } while (eat(p, ','));
  if (!eat(p, '}')) {
    snprintf(expect, sizeof expect, "expected ',' or '}' in %s", what);
    return clt__st_syntax(p, expect);
  }
  return CLT_OK;
}

void clt__st_parser_free(parser *p) {
  for (size_t i = 0; i < p->nt; i++)
    free(p->t[i].name);
  free(p->t);
  for (size_t i = 0; i < p->nm; i++) {
    free(p->m[i].key);
    free(p->m[i].value);
  }
  free(p->m);
}

int clt__st_cmp_meta(const void *a, const void *b) {
  return strcmp(((const meta *)a)->key, ((const meta *)b)->key);
}
