// big-spender in C: emits the payments whose amount is above the configured
// threshold. Bindings come from `wit-bindgen c` (see build.sh).
#include "operator.h"
#include <stdlib.h>
#include <string.h>

static double threshold;

static void fail(operator_operator_error_t *err, uint8_t tag, const char *msg) {
  err->tag = tag;
  operator_string_dup(&err->val.failed, msg);  // both cases hold a string
}

static bool named(const operator_string_t *s, const char *name) {
  return s->len == strlen(name) && memcmp(s->ptr, name, s->len) == 0;
}

bool exports_operator_init(operator_string_t *config, operator_operator_error_t *err) {
  char *text = malloc(config->len + 1);
  memcpy(text, config->ptr, config->len);
  text[config->len] = 0;
  operator_string_free(config);
  bool ok = false;
  char *at = strstr(text, "\"threshold\"");
  if (at && (at = strchr(at + 11, ':'))) {
    char *end;
    threshold = strtod(at + 1, &end);
    ok = end != at + 1;
  }
  free(text);
  if (!ok) {
    fail(err, WEIR_OPERATOR_TYPES_OPERATOR_ERROR_INVALID_CONFIG, "expected {\"threshold\": <number>}");
  }
  return ok;
}

static bool process(operator_borrow_batch_t input, operator_output_t *ret,
                    operator_operator_error_t *err);

bool exports_operator_process(operator_epoch_context_t *ctx, operator_borrow_batch_t input,
                              operator_output_t *ret, operator_operator_error_t *err) {
  operator_epoch_context_free(ctx);
  bool ok = process(input, ret, err);
  // The canonical ABI wants the borrowed batch handle given back.
  weir_operator_types_batch_drop_borrow(input);
  return ok;
}

static bool process(operator_borrow_batch_t input, operator_output_t *ret,
                    operator_operator_error_t *err) {
  weir_operator_types_list_field_t schema;
  weir_operator_types_method_batch_schema(input, &schema);
  int amount_at = -1, id_at = -1;
  for (size_t i = 0; i < schema.len; i++) {
    if (named(&schema.ptr[i].name, "amount")) amount_at = (int)i;
    if (named(&schema.ptr[i].name, "txn_id")) id_at = (int)i;
  }
  weir_operator_types_list_field_free(&schema);
  if (amount_at < 0 || id_at < 0) {
    fail(err, WEIR_OPERATOR_TYPES_OPERATOR_ERROR_FAILED, "input needs `amount` and `txn_id`");
    return false;
  }
  weir_operator_types_column_t amounts;
  weir_operator_types_method_batch_column(input, (uint32_t)amount_at, &amounts);
  if (amounts.values.tag != WEIR_OPERATOR_TYPES_VALUES_FLOAT64) {
    weir_operator_types_column_free(&amounts);
    fail(err, WEIR_OPERATOR_TYPES_OPERATOR_ERROR_FAILED, "`amount` is not float64");
    return false;
  }
  operator_list_f64_t values = amounts.values.val.float64;
  uint32_t *rows = malloc(values.len * sizeof(uint32_t) + 1);
  double *picked = malloc(values.len * sizeof(double) + 1);
  size_t k = 0;
  for (size_t r = 0; r < values.len; r++) {
    bool valid = !amounts.validity.is_some || (amounts.validity.val.ptr[r >> 3] >> (r & 7)) & 1;
    if (valid && values.ptr[r] > threshold) {
      rows[k] = (uint32_t)r;
      picked[k] = values.ptr[r];
      k++;
    }
  }
  weir_operator_types_column_free(&amounts);
  operator_list_u32_t take = {rows, k};
  weir_operator_types_column_t ids;
  weir_operator_types_method_batch_take(input, (uint32_t)id_at, &take, &ids);
  free(rows);

  weir_operator_types_output_column_t *columns = malloc(2 * sizeof(*columns));
  operator_string_dup(&columns[0].name, "txn_id");
  columns[0].column = ids;
  operator_string_dup(&columns[1].name, "amount");
  columns[1].column.values.tag = WEIR_OPERATOR_TYPES_VALUES_FLOAT64;
  columns[1].column.values.val.float64 = (operator_list_f64_t){picked, k};
  columns[1].column.validity.is_some = false;
  ret->num_rows = (uint32_t)k;
  ret->columns = (weir_operator_types_list_output_column_t){columns, 2};
  return true;
}
