/* torch_pickle.c — a pickle interpreter for the subset torch.save writes
 * for a state dict (protocol 2, and the framing of protocols 3-5). Values
 * are inert data: a global is a name from a fixed table, a call (REDUCE) is
 * the check of its arguments and the record of what torch would build.
 * Nothing is imported, called or recursed into; every read, stack and memo
 * access is bounded, and all memory is proportional to the pickle's size. */
#include "weights/torch_pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Limits far above what any state dict's pickle needs. */
#define PICKLE_MAX_BYTES (256u * 1024u * 1024u)
#define PICKLE_MAX_STACK (1u << 22)
#define PICKLE_MAX_MARKS 4096u
#define PICKLE_MAX_MEMO (1u << 24)
#define PICKLE_MAX_STRING (1u << 20)

typedef enum value_kind {
    VALUE_NONE,
    VALUE_BOOL,
    VALUE_INT,
    VALUE_STRING,
    VALUE_TUPLE,
    VALUE_LIST,
    VALUE_DICT, /* also OrderedDict: items are key, value, key, value, ... */
    VALUE_GLOBAL,
    VALUE_STORAGE,
    VALUE_TENSOR,
} value_kind;

/* The globals a state dict's pickle names; any other is refused. */
typedef enum global_id {
    GLOBAL_ORDERED_DICT,
    GLOBAL_REBUILD_TENSOR,
    GLOBAL_REBUILD_PARAMETER,
    GLOBAL_STORAGE_TYPE, /* torch.FloatStorage etc.: named in persistent ids, never called */
} global_id;

static const struct storage_type {
    const char *name;
    tensor_dtype dtype;
    const char *dtype_name;
    size_t element_size;
} storage_types[] = {
    {"FloatStorage", TENSOR_DTYPE_F32, "F32", 4},    {"HalfStorage", TENSOR_DTYPE_F16, "F16", 2},
    {"BFloat16Storage", TENSOR_DTYPE_BF16, "BF16", 2}, {"DoubleStorage", TENSOR_DTYPE_OTHER, "F64", 8},
    {"LongStorage", TENSOR_DTYPE_OTHER, "I64", 8},   {"IntStorage", TENSOR_DTYPE_OTHER, "I32", 4},
    {"ShortStorage", TENSOR_DTYPE_OTHER, "I16", 2},  {"CharStorage", TENSOR_DTYPE_OTHER, "I8", 1},
    {"ByteStorage", TENSOR_DTYPE_OTHER, "U8", 1},    {"BoolStorage", TENSOR_DTYPE_OTHER, "BOOL", 1},
};

typedef struct value value;
struct value {
    value_kind kind;
    union {
        int64_t integer; /* VALUE_BOOL, VALUE_INT */
        struct {
            const char *text;
            size_t length;
        } string;
        struct {
            value **items;
            size_t count, capacity;
        } items; /* VALUE_TUPLE, VALUE_LIST, VALUE_DICT */
        struct {
            global_id id;
            const struct storage_type *storage;
        } global;
        struct {
            const struct storage_type *type;
            const char *key;
            size_t key_length;
            uint64_t elements;
        } storage;
        torch_pickle_tensor tensor; /* name unset */
    } as;
};

typedef struct machine {
    const uint8_t *bytes;
    size_t size, at, op_at; /* next byte; the current opcode's offset */
    const char *label;
    value **stack;
    size_t depth, stack_capacity;
    size_t *marks;
    size_t mark_count, mark_capacity;
    value **memo;
    size_t memo_capacity, memo_next;
    value **all; /* every value made, for freeing */
    size_t all_count, all_capacity;
} machine;

static const char *opcode_name(uint8_t op);

/* "LABEL: pickle offset N (OPCODE): what" for the current opcode. */
static glimpse_status refuse(const machine *m, const char *format, ...) __attribute__((format(printf, 2, 3)));
static glimpse_status refuse(const machine *m, const char *format, ...) {
    char what[512];
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: pickle offset %zu (%s): %s", m->label, m->op_at,
                     opcode_name(m->bytes[m->op_at]), what);
}

/* Grows the array whose address is array_address (of element bytes each) to hold at least `needed`, up to `limit`.
 * The pointer is read and written with memcpy: it is a value ** or a size_t *, never a void *. */
static int grow(void *array_address, size_t *capacity, size_t needed, size_t element, size_t limit) {
    if (needed <= *capacity) return 1;
    if (needed > limit) return 0;
    size_t wanted = *capacity ? *capacity : 16;
    while (wanted < needed) wanted = wanted > limit / 2 ? limit : wanted * 2;
    void *array;
    memcpy(&array, array_address, sizeof array);
    void *grown = realloc(array, wanted * element);
    if (!grown) return 0;
    memcpy(array_address, &grown, sizeof grown);
    *capacity = wanted;
    return 1;
}

static value *make(machine *m, value_kind kind) {
    if (!grow(&m->all, &m->all_capacity, m->all_count + 1, sizeof *m->all, SIZE_MAX / sizeof *m->all)) return NULL;
    value *v = calloc(1, sizeof *v);
    if (v) {
        v->kind = kind;
        m->all[m->all_count++] = v;
    }
    return v;
}

static glimpse_status push(machine *m, value *v) {
    if (!v) return ERROR_OOM();
    if (!grow(&m->stack, &m->stack_capacity, m->depth + 1, sizeof *m->stack, PICKLE_MAX_STACK))
        return m->depth + 1 > PICKLE_MAX_STACK ? refuse(m, "the stack grows past %u values", PICKLE_MAX_STACK)
                                               : ERROR_OOM();
    m->stack[m->depth++] = v;
    return GLIMPSE_STATUS_OK;
}

/* The n values on top of the stack, above the last mark if there is one (*first: index of the lowest). */
static glimpse_status top(machine *m, size_t n, size_t *first) {
    size_t floor = m->mark_count ? m->marks[m->mark_count - 1] : 0;
    if (m->depth - floor < n) return refuse(m, "the opcode needs %zu values; the stack holds %zu", n, m->depth - floor);
    *first = m->depth - n;
    return GLIMPSE_STATUS_OK;
}

/* Pops back to the last mark; *first and *n give the values above it (still in m->stack until the next push). */
static glimpse_status pop_mark(machine *m, size_t *first, size_t *n) {
    if (!m->mark_count) return refuse(m, "the opcode needs a MARK; there is none");
    *first = m->marks[--m->mark_count];
    *n = m->depth - *first;
    m->depth = *first;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status append_items(value *container, value *const *items, size_t n) {
    if (!grow(&container->as.items.items, &container->as.items.capacity, container->as.items.count + n,
              sizeof(value *), SIZE_MAX / sizeof(value *)))
        return ERROR_OOM();
    if (n) memcpy(container->as.items.items + container->as.items.count, items, n * sizeof *items);
    container->as.items.count += n;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status make_tuple(machine *m, size_t first, size_t n) {
    value *tuple = make(m, VALUE_TUPLE);
    if (!tuple) return ERROR_OOM();
    glimpse_status status = append_items(tuple, n ? m->stack + first : NULL, n); /* (the stack may be unallocated) */
    if (status) return status;
    m->depth = first;
    return push(m, tuple);
}

/* Reads n bytes of operand (or refuses: the pickle ends inside the opcode). */
static glimpse_status operand(machine *m, size_t n, const uint8_t **out) {
    if (n > m->size - m->at) return refuse(m, "the pickle ends inside the opcode's operand (truncated)");
    *out = m->bytes + m->at;
    m->at += n;
    return GLIMPSE_STATUS_OK;
}

static uint64_t little_endian(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

static glimpse_status push_int(machine *m, value_kind kind, int64_t integer) {
    value *v = make(m, kind);
    if (v) v->as.integer = integer;
    return push(m, v);
}

static glimpse_status push_string(machine *m, size_t length_bytes) {
    const uint8_t *p = NULL;
    glimpse_status status = operand(m, length_bytes, &p);
    if (status) return status;
    uint64_t length = little_endian(p, length_bytes);
    if (length > PICKLE_MAX_STRING) return refuse(m, "a string of %llu bytes (over %u)", (unsigned long long)length,
                                                  PICKLE_MAX_STRING);
    if ((status = operand(m, (size_t)length, &p))) return status;
    value *v = make(m, VALUE_STRING);
    if (v) v->as.string.text = (const char *)p, v->as.string.length = (size_t)length;
    return push(m, v);
}

/* LONG1: a little-endian two's-complement integer of up to 8 bytes. */
static glimpse_status push_long1(machine *m) {
    const uint8_t *p = NULL;
    glimpse_status status = operand(m, 1, &p);
    size_t n = status ? 0 : p[0];
    if (status || (status = operand(m, n, &p))) return status;
    if (n > 8) return refuse(m, "LONG1 of %zu bytes (over 8)", n);
    uint64_t bits = little_endian(p, n);
    if (n && n < 8 && (p[n - 1] & 0x80)) bits |= ~(uint64_t)0 << (8 * n);
    return push_int(m, VALUE_INT, (int64_t)bits);
}

static glimpse_status memo_put(machine *m, uint64_t index) {
    if (!m->depth) return refuse(m, "a memo store with an empty stack");
    if (index >= PICKLE_MAX_MEMO || index >= m->size)
        return refuse(m, "memo index %llu is out of range", (unsigned long long)index);
    size_t old = m->memo_capacity;
    if (!grow(&m->memo, &m->memo_capacity, (size_t)index + 1, sizeof *m->memo, PICKLE_MAX_MEMO)) return ERROR_OOM();
    if (m->memo_capacity > old) memset(m->memo + old, 0, (m->memo_capacity - old) * sizeof *m->memo);
    m->memo[index] = m->stack[m->depth - 1];
    if (index >= m->memo_next) m->memo_next = (size_t)index + 1;
    return GLIMPSE_STATUS_OK;
}

static glimpse_status memo_get(machine *m, uint64_t index) {
    if (index >= m->memo_capacity || !m->memo[index])
        return refuse(m, "memo index %llu was never stored", (unsigned long long)index);
    return push(m, m->memo[index]);
}

static int string_is(const value *v, const char *text) {
    return v->kind == VALUE_STRING && v->as.string.length == strlen(text) &&
           memcmp(v->as.string.text, text, v->as.string.length) == 0;
}

/* A GLOBAL's module and name, looked up in the allowed table; any other is refused. */
static glimpse_status push_global(machine *m, const char *module, size_t module_length, const char *name,
                                  size_t name_length) {
    static const struct {
        const char *module, *name;
        global_id id;
    } allowed[] = {
        {"collections", "OrderedDict", GLOBAL_ORDERED_DICT},
        {"torch._utils", "_rebuild_tensor_v2", GLOBAL_REBUILD_TENSOR},
        {"torch._utils", "_rebuild_parameter", GLOBAL_REBUILD_PARAMETER},
    };
#define SAME(text, s, n) ((n) == strlen(text) && memcmp(s, text, n) == 0)
    int found = 0;
    global_id id = GLOBAL_STORAGE_TYPE;
    const struct storage_type *storage = NULL;
    for (size_t i = 0; !found && i < sizeof allowed / sizeof allowed[0]; i++)
        if (SAME(allowed[i].module, module, module_length) && SAME(allowed[i].name, name, name_length))
            found = 1, id = allowed[i].id;
    size_t storage_count = SAME("torch", module, module_length) ? sizeof storage_types / sizeof storage_types[0] : 0;
    for (size_t i = 0; !found && i < storage_count; i++)
        if (SAME(storage_types[i].name, name, name_length)) found = 1, storage = &storage_types[i];
#undef SAME
    if (!found)
        return refuse(m, "global '%.*s.%.*s' refused: a state dict names only collections.OrderedDict, "
                      "torch._utils._rebuild_tensor_v2 / _rebuild_parameter and torch's storage types, and nothing "
                      "in the file is run", (int)(module_length > 100 ? 100 : module_length), module,
                      (int)(name_length > 100 ? 100 : name_length), name);
    value *v = make(m, VALUE_GLOBAL);
    if (v) v->as.global.id = id, v->as.global.storage = storage;
    return push(m, v);
}

/* GLOBAL: "module\nname\n" (printable text, each line at most 256 bytes). */
static glimpse_status op_global(machine *m) {
    const char *lines[2];
    size_t lengths[2];
    for (int i = 0; i < 2; i++) {
        const uint8_t *start = m->bytes + m->at, *end = memchr(start, '\n', m->size - m->at);
        if (!end) return refuse(m, "GLOBAL's text has no end of line (truncated)");
        lines[i] = (const char *)start;
        lengths[i] = (size_t)(end - start);
        m->at += lengths[i] + 1;
    }
    return push_global(m, lines[0], lengths[0], lines[1], lengths[1]);
}

/* STACK_GLOBAL (protocol 4): module and name are the two strings on top. */
static glimpse_status op_stack_global(machine *m) {
    size_t first = 0;
    glimpse_status status = top(m, 2, &first);
    if (status) return status;
    const value *module = m->stack[first], *name = m->stack[first + 1];
    if (module->kind != VALUE_STRING || name->kind != VALUE_STRING)
        return refuse(m, "STACK_GLOBAL of values that are not strings");
    m->depth = first;
    return push_global(m, module->as.string.text, module->as.string.length, name->as.string.text,
                       name->as.string.length);
}

/* BINPERSID: ('storage', torch.XStorage, key, location, elements) becomes a storage reference. */
static glimpse_status op_persistent_id(machine *m) {
    size_t first = 0;
    glimpse_status status = top(m, 1, &first);
    if (status) return status;
    const value *id = m->stack[first];
    value *const *f = id->kind == VALUE_TUPLE ? id->as.items.items : NULL;
    if (!f || id->as.items.count != 5 || !string_is(f[0], "storage") || f[1]->kind != VALUE_GLOBAL ||
        f[1]->as.global.id != GLOBAL_STORAGE_TYPE || f[2]->kind != VALUE_STRING || f[3]->kind != VALUE_STRING ||
        f[4]->kind != VALUE_INT || f[4]->as.integer < 0)
        return refuse(m, "BINPERSID of something other than ('storage', torch.XStorage, key, location, size)");
    value *storage = make(m, VALUE_STORAGE);
    if (!storage) return ERROR_OOM();
    storage->as.storage.type = f[1]->as.global.storage;
    storage->as.storage.key = f[2]->as.string.text;
    storage->as.storage.key_length = f[2]->as.string.length;
    storage->as.storage.elements = (uint64_t)f[4]->as.integer;
    m->depth = first;
    return push(m, storage);
}

/* A tuple of `rank` non-negative ints into out[]. */
static int int_tuple(const value *v, uint64_t *out, int *rank) {
    if (v->kind != VALUE_TUPLE || v->as.items.count > TENSOR_MAX_RANK) return 0;
    for (size_t i = 0; i < v->as.items.count; i++) {
        const value *item = v->as.items.items[i];
        if (item->kind != VALUE_INT || item->as.integer < 0) return 0;
        out[i] = (uint64_t)item->as.integer;
    }
    *rank = (int)v->as.items.count;
    return 1;
}

static int empty_dict_or_none(const value *v) {
    return v->kind == VALUE_NONE || (v->kind == VALUE_DICT && v->as.items.count == 0);
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, metadata]). */
static glimpse_status rebuild_tensor(machine *m, const value *args, value **out) {
    value *const *a = args->as.items.items;
    size_t n = args->as.items.count;
    int rank = 0, stride_rank = -1;
    value *tensor = make(m, VALUE_TENSOR);
    if (!tensor) return ERROR_OOM();
    torch_pickle_tensor *t = &tensor->as.tensor;
    if ((n != 6 && n != 7) || a[0]->kind != VALUE_STORAGE || a[1]->kind != VALUE_INT || a[1]->as.integer < 0 ||
        !int_tuple(a[2], t->shape, &rank) || !int_tuple(a[3], t->stride, &stride_rank) || rank != stride_rank ||
        a[4]->kind != VALUE_BOOL || a[5]->kind != VALUE_DICT || a[5]->as.items.count != 0 ||
        (n == 7 && !empty_dict_or_none(a[6])))
        return refuse(m, "REDUCE of torch._utils._rebuild_tensor_v2 with arguments other than (storage, offset, "
                      "size, stride, requires_grad, {} hooks)");
    const struct storage_type *type = a[0]->as.storage.type;
    t->dtype = type->dtype;
    t->dtype_name = type->dtype_name;
    t->element_size = type->element_size;
    t->key = a[0]->as.storage.key;
    t->key_length = a[0]->as.storage.key_length;
    t->storage_elements = a[0]->as.storage.elements;
    t->offset = (uint64_t)a[1]->as.integer;
    t->rank = rank;
    *out = tensor;
    return GLIMPSE_STATUS_OK;
}

/* REDUCE: a call of an allowed global, checked and recorded, never run. */
static glimpse_status op_reduce(machine *m) {
    size_t first = 0;
    glimpse_status status = top(m, 2, &first);
    if (status) return status;
    const value *callable = m->stack[first], *args = m->stack[first + 1];
    if (callable->kind != VALUE_GLOBAL || callable->as.global.id == GLOBAL_STORAGE_TYPE || args->kind != VALUE_TUPLE)
        return refuse(m, "REDUCE of something other than OrderedDict, _rebuild_tensor_v2 or _rebuild_parameter "
                      "with a tuple of arguments");
    value *result = NULL;
    value *const *a = args->as.items.items;
    size_t n = args->as.items.count;
    if (callable->as.global.id == GLOBAL_ORDERED_DICT) {
        if (n != 0) return refuse(m, "REDUCE of collections.OrderedDict with arguments");
        if (!(result = make(m, VALUE_DICT))) return ERROR_OOM();
    } else if (callable->as.global.id == GLOBAL_REBUILD_PARAMETER) {
        if (n != 3 || a[0]->kind != VALUE_TENSOR || a[1]->kind != VALUE_BOOL || a[2]->kind != VALUE_DICT ||
            a[2]->as.items.count != 0)
            return refuse(m, "REDUCE of torch._utils._rebuild_parameter with arguments other than (tensor, "
                          "requires_grad, {} hooks)");
        result = a[0];
    } else if ((status = rebuild_tensor(m, args, &result))) {
        return status;
    }
    m->depth = first;
    return push(m, result);
}

/* BUILD: an OrderedDict's state (a state dict's _metadata: names of modules to versions), kept out. */
static glimpse_status op_build(machine *m) {
    size_t first = 0;
    glimpse_status status = top(m, 2, &first);
    if (status) return status;
    const value *object = m->stack[first], *state = m->stack[first + 1];
    if (object->kind != VALUE_DICT || (state->kind != VALUE_DICT && state->kind != VALUE_NONE))
        return refuse(m, "BUILD of something other than an OrderedDict with a dict of attributes");
    m->depth = first + 1;
    return GLIMPSE_STATUS_OK;
}

/* SETITEM / SETITEMS / APPEND / APPENDS: items above first go into the container below them. */
static glimpse_status fill(machine *m, size_t first, size_t n, value_kind kind, const char *opcode) {
    if (first == 0 || m->stack[first - 1]->kind != kind)
        return refuse(m, "%s without a %s below its items", opcode, kind == VALUE_DICT ? "dict" : "list");
    if (kind == VALUE_DICT && n % 2) return refuse(m, "%s with an odd number of keys and values", opcode);
    glimpse_status status = append_items(m->stack[first - 1], m->stack + first, n);
    m->depth = first;
    return status;
}

/* Names of the opcodes, for messages. */
static const char *opcode_name(uint8_t op) {
    static const struct {
        uint8_t op;
        const char *name;
    } names[] = {
        {'i', "INST"},        {'o', "OBJ"},         {0x81, "NEWOBJ"},      {0x92, "NEWOBJ_EX"},
        {'P', "PERSID"},      {'I', "INT"},         {'L', "LONG"},         {'F', "FLOAT"},
        {'G', "BINFLOAT"},    {'S', "STRING"},      {'T', "BINSTRING"},    {'U', "SHORT_BINSTRING"},
        {'V', "UNICODE"},     {'B', "BINBYTES"},    {'C', "SHORT_BINBYTES"}, {0x8e, "BINBYTES8"},
        {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}, {0x82, "EXT1"},
        {0x83, "EXT2"},       {0x84, "EXT4"},       {0x8b, "LONG4"},       {'d', "DICT"},
        {'l', "LIST"},        {'0', "POP"},         {'1', "POP_MARK"},     {'2', "DUP"},
        {'g', "GET"},         {'p', "PUT"},         {0x8f, "EMPTY_SET"},   {0x90, "ADDITEMS"},
        {0x91, "FROZENSET"},  {0x8d, "BINUNICODE8"}, {0x80, "PROTO"},      {0x95, "FRAME"},
        {'c', "GLOBAL"},      {0x93, "STACK_GLOBAL"}, {'Q', "BINPERSID"},  {'R', "REDUCE"},
        {'b', "BUILD"},       {'.', "STOP"},        {'N', "NONE"},         {0x88, "NEWTRUE"},
        {0x89, "NEWFALSE"},   {'K', "BININT1"},     {'M', "BININT2"},      {'J', "BININT"},
        {0x8a, "LONG1"},      {'X', "BINUNICODE"},  {0x8c, "SHORT_BINUNICODE"}, {'q', "BINPUT"},
        {'r', "LONG_BINPUT"}, {0x94, "MEMOIZE"},    {'h', "BINGET"},       {'j', "LONG_BINGET"},
        {'(', "MARK"},        {')', "EMPTY_TUPLE"}, {0x85, "TUPLE1"},      {0x86, "TUPLE2"},
        {0x87, "TUPLE3"},     {'t', "TUPLE"},       {']', "EMPTY_LIST"},   {'}', "EMPTY_DICT"},
        {'a', "APPEND"},      {'e', "APPENDS"},     {'s', "SETITEM"},      {'u', "SETITEMS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].op == op) return names[i].name;
    return "unknown";
}

/* Opcodes that push a constant, a number, a string or a memo entry. */
static glimpse_status op_data(machine *m, uint8_t op, int *handled) {
    const uint8_t *p = NULL;
    glimpse_status status = GLIMPSE_STATUS_OK;
    *handled = 1;
    switch (op) {
    case 'N': return push(m, make(m, VALUE_NONE));
    case 0x88: return push_int(m, VALUE_BOOL, 1); /* NEWTRUE */
    case 0x89: return push_int(m, VALUE_BOOL, 0); /* NEWFALSE */
    case 'K': return (status = operand(m, 1, &p)) ? status : push_int(m, VALUE_INT, p[0]);
    case 'M': return (status = operand(m, 2, &p)) ? status : push_int(m, VALUE_INT, (int64_t)little_endian(p, 2));
    case 'J': return (status = operand(m, 4, &p)) ? status : push_int(m, VALUE_INT, (int32_t)little_endian(p, 4));
    case 0x8a: return push_long1(m);
    case 'X': return push_string(m, 4);    /* BINUNICODE */
    case 0x8c: return push_string(m, 1);   /* SHORT_BINUNICODE */
    case 'q': return (status = operand(m, 1, &p)) ? status : memo_put(m, p[0]);
    case 'r': return (status = operand(m, 4, &p)) ? status : memo_put(m, little_endian(p, 4));
    case 0x94: return memo_put(m, m->memo_next); /* MEMOIZE */
    case 'h': return (status = operand(m, 1, &p)) ? status : memo_get(m, p[0]);
    case 'j': return (status = operand(m, 4, &p)) ? status : memo_get(m, little_endian(p, 4));
    default: *handled = 0; return GLIMPSE_STATUS_OK;
    }
}

/* Opcodes that build tuples, lists and dicts, and the marks they use. */
static glimpse_status op_container(machine *m, uint8_t op, int *handled) {
    size_t first = 0, n = 0;
    glimpse_status status = GLIMPSE_STATUS_OK;
    *handled = 1;
    switch (op) {
    case '(': /* MARK */
        if (!grow(&m->marks, &m->mark_capacity, m->mark_count + 1, sizeof *m->marks, PICKLE_MAX_MARKS))
            return m->mark_count + 1 > PICKLE_MAX_MARKS ? refuse(m, "MARKs nest deeper than %u", PICKLE_MAX_MARKS)
                                                        : ERROR_OOM();
        m->marks[m->mark_count++] = m->depth;
        return GLIMPSE_STATUS_OK;
    case ')': return push(m, make(m, VALUE_TUPLE)); /* EMPTY_TUPLE */
    case 0x85: case 0x86: case 0x87:                /* TUPLE1, TUPLE2, TUPLE3 */
        return (status = top(m, (size_t)(op - 0x84), &first)) ? status : make_tuple(m, first, (size_t)(op - 0x84));
    case 't': return (status = pop_mark(m, &first, &n)) ? status : make_tuple(m, first, n);
    case ']': return push(m, make(m, VALUE_LIST)); /* EMPTY_LIST */
    case '}': return push(m, make(m, VALUE_DICT)); /* EMPTY_DICT */
    case 'a': return (status = top(m, 1, &first)) ? status : fill(m, first, 1, VALUE_LIST, "APPEND");
    case 'e': return (status = pop_mark(m, &first, &n)) ? status : fill(m, first, n, VALUE_LIST, "APPENDS");
    case 's': return (status = top(m, 2, &first)) ? status : fill(m, first, 2, VALUE_DICT, "SETITEM");
    case 'u': return (status = pop_mark(m, &first, &n)) ? status : fill(m, first, n, VALUE_DICT, "SETITEMS");
    default: *handled = 0; return GLIMPSE_STATUS_OK;
    }
}

/* Runs the pickle to its STOP; *result is the value it leaves. */
static glimpse_status run(machine *m, const value **result) {
    while (m->at < m->size) {
        m->op_at = m->at;
        uint8_t op = m->bytes[m->at++];
        const uint8_t *p = NULL;
        int handled;
        glimpse_status status = op_data(m, op, &handled);
        if (!handled) status = op_container(m, op, &handled);
        if (handled) {
            if (status) return status;
            continue;
        }
        switch (op) {
        case 0x80: /* PROTO */
            if ((status = operand(m, 1, &p))) return status;
            if (p[0] < 2 || p[0] > 5) return refuse(m, "pickle protocol %u (torch.save writes 2 to 5)", p[0]);
            break;
        case 0x95: status = operand(m, 8, &p); break; /* FRAME: a length, for buffered readers */
        case 'c': status = op_global(m); break;
        case 0x93: status = op_stack_global(m); break;
        case 'Q': status = op_persistent_id(m); break;
        case 'R': status = op_reduce(m); break;
        case 'b': status = op_build(m); break;
        case '.': /* STOP */
            if (m->depth != 1) return refuse(m, "STOP with %zu values on the stack (a pickle leaves one)", m->depth);
            *result = m->stack[0];
            return GLIMPSE_STATUS_OK;
        default:
            return refuse(m, "opcode 0x%02x is not one a state dict uses; refused, nothing run", op);
        }
        if (status) return status;
    }
    return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the pickle ends at offset %zu without STOP (truncated)",
                     m->label, m->size);
}

/* The state dict's entries, each a name and a tensor, copied out of the machine. */
static glimpse_status collect(const machine *m, const value *dict, torch_pickle_tensor **tensors, size_t *count) {
    if (dict->kind != VALUE_DICT)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the pickle holds no dict of tensors (not a state dict)",
                         m->label);
    size_t n = dict->as.items.count / 2;
    *tensors = calloc(n ? n : 1, sizeof **tensors);
    if (!*tensors) return ERROR_OOM();
    for (size_t i = 0; i < n; i++) {
        const value *key = dict->as.items.items[2 * i], *item = dict->as.items.items[2 * i + 1];
        if (key->kind != VALUE_STRING || memchr(key->as.string.text, '\0', key->as.string.length) ||
            key->as.string.length == 0) {
            free(*tensors);
            *tensors = NULL;
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: state dict entry %zu has a key that is not a name",
                             m->label, i);
        }
        if (item->kind != VALUE_TENSOR) {
            free(*tensors);
            *tensors = NULL;
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: state dict entry '%.*s' is not a tensor", m->label,
                             (int)(key->as.string.length > 200 ? 200 : key->as.string.length), key->as.string.text);
        }
        (*tensors)[i] = item->as.tensor;
        (*tensors)[i].name = key->as.string.text;
        (*tensors)[i].name_length = key->as.string.length;
    }
    *count = n;
    return GLIMPSE_STATUS_OK;
}

glimpse_status torch_pickle_read(const uint8_t *pickle, size_t size, const char *label, torch_pickle_tensor **tensors,
                                 size_t *count) {
    *tensors = NULL;
    *count = 0;
    if (size > PICKLE_MAX_BYTES)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: a pickle of %zu bytes (over %u)", label, size,
                         PICKLE_MAX_BYTES);
    machine m = {.bytes = pickle, .size = size, .label = label};
    const value *result = NULL;
    glimpse_status status = run(&m, &result);
    if (!status) status = collect(&m, result, tensors, count);
    for (size_t i = 0; i < m.all_count; i++) {
        value_kind kind = m.all[i]->kind;
        if (kind == VALUE_TUPLE || kind == VALUE_LIST || kind == VALUE_DICT) free(m.all[i]->as.items.items);
        free(m.all[i]);
    }
    free(m.all);
    free(m.stack);
    free(m.marks);
    free(m.memo);
    return status;
}
