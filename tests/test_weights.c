/* test_weights.c — the safetensors reader against damaged files (every
 * offset, length, dtype and shape checked), float16/bfloat16 widening,
 * sharded checkpoints, loading layers by a names table, config field errors
 * and hub-cache resolution. Builds its own files; needs no fixtures. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "core/kernels.h"
#include "tests/support.h"

#include "weights/config.h"
#include "core/file.h"
#include "weights/layers.h"
#include "weights/safetensors.h"
#include "weights/snapshot.h"
#include "weights/store.h"

/* header JSON + data into one buffer; caller frees. */
static uint8_t *make_file(const char *header, const void *data, size_t data_size, size_t *size) {
    size_t header_size = strlen(header);
    *size = 8 + header_size + data_size;
    uint8_t *bytes = malloc(*size);
    for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)((uint64_t)header_size >> (8 * i));
    memcpy(bytes + 8, header, header_size);
    if (data_size) memcpy(bytes + 8 + header_size, data, data_size);
    return bytes;
}

static glimpse_status parse(const char *header, size_t data_size, safetensors **out) {
    uint8_t data[64] = {0};
    size_t size;
    uint8_t *bytes = make_file(header, data, data_size, &size);
    glimpse_status status = safetensors_parse(bytes, size, "test.safetensors", out);
    if (status == GLIMPSE_STATUS_OK) {
        /* keep the bytes alive with the parsed file for this test only */
        (*out)->owns_mapping = 0;
    } else {
        free(bytes);
    }
    return status;
}

static void expect_bad(const char *header, size_t data_size, const char *needle) {
    safetensors *file = NULL;
    glimpse_status status = parse(header, data_size, &file);
    if (status == GLIMPSE_STATUS_OK) fail_msg("accepted a bad header: %s", header);
    assert_int_equal(status, GLIMPSE_STATUS_BAD_FORMAT);
    if (!strstr(glimpse_last_error(), needle))
        fail_msg("error \"%s\" does not mention \"%s\"", glimpse_last_error(), needle);
    assert_non_null(strstr(glimpse_last_error(), "test.safetensors"));
}

static void test_valid_file(void **state) {
    (void)state;
    safetensors *file;
    assert_int_equal(parse("{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                           "\"data_offsets\":[0,24]},\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[24,32]}}",
                           32, &file),
                     GLIMPSE_STATUS_OK);
    assert_int_equal(file->count, 2);
    const tensor_entry *b = safetensors_find(file, "b");
    assert_non_null(b);
    assert_int_equal(b->rank, 2);
    assert_int_equal(b->shape[1], 3);
    assert_int_equal(b->elements, 6);
    assert_int_equal(safetensors_find(file, "a")->dtype, TENSOR_DTYPE_OTHER);
    assert_null(safetensors_find(file, "c"));
    free((void *)file->bytes);
    safetensors_close(file);
}

static void test_damaged_headers(void **state) {
    (void)state;
    /* header length larger than the file */
    uint8_t tiny[12] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}', 0, 0};
    safetensors *file;
    assert_int_equal(safetensors_parse(tiny, sizeof tiny, "test.safetensors", &file), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "header length"));
    assert_int_equal(safetensors_parse(tiny, 5, "test.safetensors", &file), GLIMPSE_STATUS_BAD_FORMAT);
    expect_bad("not json at all", 0, "not a JSON object");
    expect_bad("[1,2,3]", 0, "not a JSON object");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "data section");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "need 12");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "claims bytes");
    expect_bad("{\"t\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape entry");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8, "shape entry");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
               "too large");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "lacks");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, "twice");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 8, "rank");
}

static void test_half_precision(void **state) {
    (void)state;
    assert_float_equal(kernel_f16_to_f32(0x3c00), 1.0f, 0);
    assert_float_equal(kernel_f16_to_f32(0xc000), -2.0f, 0);
    assert_float_equal(kernel_f16_to_f32(0x0001), 5.9604644775390625e-08f, 0);
    assert_float_equal(kernel_f16_to_f32(0x7bff), 65504.0f, 0);
    assert_true(kernel_f16_to_f32(0x7c00) > 1e38f);
    assert_true(kernel_f16_to_f32(0x7e00) != kernel_f16_to_f32(0x7e00)); /* NaN */
    assert_float_equal(kernel_bf16_to_f32(0x3f80), 1.0f, 0);
    assert_float_equal(kernel_bf16_to_f32(0xc040), -3.0f, 0);
}

static char *temp_folder(void) {
    char *folder = strdup("/tmp/glimpse-test-XXXXXX");
    assert_non_null(mkdtemp(folder));
    return folder;
}

/* Removes a temp_folder and everything in it, and frees its name. */
static void temp_folder_free(char *folder) {
    remove_tree(folder);
    free(folder);
}

static void write_file(const char *folder, const char *name, const void *bytes, size_t size) {
    char *path = file_join(folder, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    fclose(f);
    free(path);
}

static void write_tensors(const char *folder, const char *name, const char *header, const void *data, size_t size) {
    size_t total;
    uint8_t *bytes = make_file(header, data, size, &total);
    write_file(folder, name, bytes, total);
    free(bytes);
}

static void test_store_dtypes_and_shapes(void **state) {
    (void)state;
    char *folder = temp_folder();
    /* f32 [2], f16 [2], bf16 [2], i64 [1], f32 at an odd offset, bf16 [1, 2] at an odd offset */
    uint8_t data[40] = {0};
    float f32[2] = {1.5f, -2.0f};
    memcpy(data, f32, 8);
    uint16_t f16[2] = {0x3c00, 0xc000}, bf16[2] = {0x3f80, 0xc040};
    memcpy(data + 8, f16, 4);
    memcpy(data + 12, bf16, 4);
    float odd = 7.0f;
    memcpy(data + 25, &odd, 4);
    memcpy(data + 29, bf16, 4);
    write_tensors(folder, "model.safetensors",
                  "{\"f32\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"f16\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                  "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]},"
                  "\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
                  "\"odd\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[25,29]},"
                  "\"matrix\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[29,33]}}",
                  data, 33);
    weight_store *store;
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_OK);
    const float *values;
    size_t two[1] = {2}, one[1] = {1}, three[1] = {3};
    assert_int_equal(weight_store_get(store, &values, 1, two, "f32"), GLIMPSE_STATUS_OK);
    assert_float_equal(values[1], -2.0f, 0);
    assert_int_equal(weight_store_get(store, &values, 1, two, "f16"), GLIMPSE_STATUS_OK);
    assert_float_equal(values[0], 1.0f, 0);
    assert_float_equal(values[1], -2.0f, 0);
    assert_int_equal(weight_store_get(store, &values, 1, two, "bf16"), GLIMPSE_STATUS_OK);
    assert_float_equal(values[1], -3.0f, 0);
    assert_int_equal(weight_store_get(store, &values, 1, one, "odd"), GLIMPSE_STATUS_OK);
    assert_float_equal(values[0], 7.0f, 0);
    /* a weight matrix: kept 16-bit where the AVX-512 kernels run (realigned
     * here, since the file puts it at an odd address), widened elsewhere */
    size_t copied = weight_store_copied_bytes(store);
    kernel_weight matrix;
    assert_int_equal(weight_store_get_matrix(store, &matrix, 1, 2, "matrix"), GLIMPSE_STATUS_OK);
    float widened[2];
    if (cpu_has_avx512()) {
        assert_int_equal(matrix.type, WEIGHT_TYPE_BF16);
        assert_int_equal((uintptr_t)matrix.data % 2, 0);
        assert_int_equal(weight_store_copied_bytes(store) - copied, 4);
    } else {
        assert_int_equal(matrix.type, WEIGHT_TYPE_F32);
        assert_int_equal(weight_store_copied_bytes(store) - copied, 8);
    }
    kernel_widen(widened, matrix.data, matrix.type, 2);
    assert_float_equal(widened[0], 1.0f, 0);
    assert_float_equal(widened[1], -3.0f, 0);
    assert_int_equal(weight_store_get_matrix(store, &matrix, 2, 1, "matrix"), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(weight_store_get_matrix_optional(store, &matrix, 1, 2, "absent"), GLIMPSE_STATUS_OK);
    assert_null(matrix.data);
    assert_string_equal(weight_store_dtype(store), "mixed");
    /* wrong shape, missing tensor, integer tensor: errors that name them */
    assert_int_equal(weight_store_get(store, &values, 1, three, "f32"), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "'f32' has shape [2], the config implies [3]"));
    const float *bias;
    assert_int_equal(layers_load_norm(store, "layer.4", 1, &values, &bias), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "no tensor 'layer.4.weight'"));
    assert_int_equal(weight_store_get(store, &values, 1, one, "ids"), GLIMPSE_STATUS_UNSUPPORTED);
    assert_non_null(strstr(glimpse_last_error(), "I64"));
    assert_int_equal(weight_store_get_optional(store, &values, 1, one, "absent"), GLIMPSE_STATUS_OK);
    assert_null(values);
    weight_store_free(store);
    temp_folder_free(folder);
}

/* A float32 checkpoint in folder: tensor i is names[i] with shapes[i] ("[3,1]") and values[i] numbers, all i + 1. */
static void write_numbered_tensors(const char *folder, const char *const *names, const char *const *shapes,
                                   const size_t *values, size_t count) {
    char header[4096] = "{";
    float data[64];
    size_t used = 0;
    for (size_t i = 0; i < count; i++) {
        for (size_t j = 0; j < values[i]; j++) data[used + j] = (float)(i + 1);
        size_t length = strlen(header);
        snprintf(header + length, sizeof header - length,
                 "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i],
                 shapes[i], used * 4, (used + values[i]) * 4);
        used += values[i];
    }
    strcat(header, "}");
    write_tensors(folder, "model.safetensors", header, data, used * 4);
}

static void test_encoder_layers_by_names(void **state) {
    (void)state;
    char *folder = temp_folder();
    /* one pre-LN layer of width 1 with q | k | v fused, under the stack "enc" */
    const char *names[] = {"enc.0.n1.weight", "enc.0.n1.bias", "enc.0.n2.weight", "enc.0.n2.bias",
                           "enc.0.qkv.weight", "enc.0.qkv.bias", "enc.0.o.weight", "enc.0.o.bias",
                           "enc.0.f1.weight", "enc.0.f1.bias", "enc.0.f2.weight", "enc.0.f2.bias"};
    const char *shapes[] = {"[1]", "[1]", "[1]", "[1]", "[3,1]", "[3]", "[1,1]", "[1]", "[1,1]", "[1]", "[1,1]", "[1]"};
    const size_t values[] = {1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1};
    write_numbered_tensors(folder, names, shapes, values, 12);
    weight_store *store;
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_OK);
    const encoder_layer_names layout = {.norm1 = "n1", .qkv = "qkv", .out = "o", .norm2 = "n2", .fc1 = "f1",
                                        .fc2 = "f2"};
    encoder_layer *layers;
    assert_int_equal(layers_load_encoder_stack(store, &layout, "enc", 1, 1, 1, &layers), GLIMPSE_STATUS_OK);
    /* every field holds its own tensor (tensor i holds i + 1); no separate q, k, v */
    assert_float_equal(layers[0].norm1_weight[0], 1, 0);
    assert_float_equal(layers[0].norm2_bias[0], 4, 0);
    assert_float_equal(((const float *)layers[0].qkv_weight.data)[2], 5, 0);
    assert_float_equal(layers[0].qkv_bias[2], 6, 0);
    assert_float_equal(((const float *)layers[0].out_weight.data)[0], 7, 0);
    assert_float_equal(layers[0].fc1_bias[0], 10, 0);
    assert_float_equal(((const float *)layers[0].fc2_weight.data)[0], 11, 0);
    assert_null(layers[0].q_weight.data);
    assert_null(layers[0].k_bias);
    assert_int_equal(weight_store_parameters(store), 16); /* every tensor, each once */
    free(layers);
    /* a layer the checkpoint lacks: the error names the whole tensor */
    assert_int_equal(layers_load_encoder_stack(store, &layout, "enc", 2, 1, 1, &layers), GLIMPSE_STATUS_NOT_FOUND);
    assert_null(layers);
    assert_non_null(strstr(glimpse_last_error(), "no tensor 'enc.1.n1.weight'"));
    /* a name longer than the loaders compose is an error naming its start, never a lookup of a shortened name */
    char stack[LAYERS_NAME_CAPACITY + 40];
    memset(stack, 'x', sizeof stack - 1);
    memcpy(stack, "very.long", 9);
    stack[sizeof stack - 1] = '\0';
    assert_int_equal(layers_load_encoder_stack(store, &layout, stack, 1, 1, 1, &layers), GLIMPSE_STATUS_INTERNAL);
    assert_null(layers);
    assert_non_null(strstr(glimpse_last_error(), "'very.longxxx"));
    assert_non_null(strstr(glimpse_last_error(), "longer than"));
    weight_store_free(store);
    temp_folder_free(folder);
}

/* SigLIP's attention-pooling head: q, k and v are row views of one stacked in_proj_weight. */
static void test_attention_pool_by_names(void **state) {
    (void)state;
    char *folder = temp_folder();
    const char *names[] = {"head.probe", "head.attention.in_proj_weight", "head.attention.in_proj_bias",
                           "head.attention.out_proj.weight", "head.attention.out_proj.bias", "head.layernorm.weight",
                           "head.layernorm.bias", "head.mlp.fc1.weight", "head.mlp.fc1.bias", "head.mlp.fc2.weight",
                           "head.mlp.fc2.bias"};
    const char *shapes[] = {"[1,1,2]", "[6,2]", "[6]", "[2,2]", "[2]", "[2]", "[2]", "[3,2]", "[3]", "[2,3]", "[2]"};
    const size_t values[] = {2, 12, 6, 4, 2, 2, 2, 6, 3, 6, 2};
    write_numbered_tensors(folder, names, shapes, values, 11);
    weight_store *store;
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_OK);
    attention_pool_names layout = {.probe = "probe", .in_proj_weight = "attention.in_proj_weight",
                                   .in_proj_bias = "attention.in_proj_bias", .out_proj = "attention.out_proj",
                                   .norm = "layernorm", .fc1 = "mlp.fc1", .fc2 = "mlp.fc2"};
    encoder_layer head;
    const float *probe;
    assert_int_equal(layers_load_attention_pool(store, &layout, "head", 2, 3, &head, &probe), GLIMPSE_STATUS_OK);
    assert_float_equal(probe[1], 1, 0);
    const float *in_proj = head.q_weight.data;
    assert_float_equal(in_proj[11], 2, 0);
    assert_ptr_equal(head.k_weight.data, in_proj + 4); /* rows 2-3 of [q; k; v] */
    assert_ptr_equal(head.v_weight.data, in_proj + 8);
    assert_ptr_equal(head.k_bias, head.q_bias + 2);
    assert_ptr_equal(head.v_bias, head.q_bias + 4);
    assert_float_equal(head.v_bias[1], 3, 0);
    assert_float_equal(((const float *)head.out_weight.data)[3], 4, 0);
    assert_float_equal(head.norm2_bias[1], 7, 0);
    assert_float_equal(((const float *)head.fc1_weight.data)[5], 8, 0);
    assert_float_equal(head.fc2_bias[1], 11, 0);
    assert_null(head.norm1_weight); /* the keys and values are the states as they come */
    assert_null(head.qkv_weight.data);
    assert_int_equal(weight_store_parameters(store), 47);
    layout.fc2 = "mlp.fc3";
    assert_int_equal(layers_load_attention_pool(store, &layout, "head", 2, 3, &head, &probe),
                     GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "no tensor 'head.mlp.fc3.weight'"));
    weight_store_free(store);
    temp_folder_free(folder);
}

static void test_sharded_store(void **state) {
    (void)state;
    char *folder = temp_folder();
    float a = 1.0f, b = 2.0f;
    write_tensors(folder, "model-00001-of-00002.safetensors",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", &a, 4);
    write_tensors(folder, "model-00002-of-00002.safetensors",
                  "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", &b, 4);
    const char *index = "{\"metadata\":{},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                        "\"b\":\"model-00002-of-00002.safetensors\"}}";
    write_file(folder, "model.safetensors.index.json", index, strlen(index));
    weight_store *store;
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_OK);
    const float *values;
    size_t one[1] = {1};
    assert_int_equal(weight_store_get(store, &values, 1, one, "b"), GLIMPSE_STATUS_OK);
    assert_float_equal(values[0], 2.0f, 0);
    weight_store_free(store);
    /* an index naming a shard outside the folder is refused */
    const char *escaping = "{\"weight_map\":{\"a\":\"../model-00001-of-00002.safetensors\"}}";
    write_file(folder, "model.safetensors.index.json", escaping, strlen(escaping));
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "invalid shard name"));
    /* an index naming a tensor its shard lacks */
    const char *lying = "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                        "\"c\":\"model-00001-of-00002.safetensors\"}}";
    write_file(folder, "model.safetensors.index.json", lying, strlen(lying));
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "'c'"));
    /* an index naming a shard that is not there: the shard is named */
    const char *missing = "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                          "\"d\":\"model-00003-of-00003.safetensors\"}}";
    write_file(folder, "model.safetensors.index.json", missing, strlen(missing));
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "shard model-00003-of-00003.safetensors (tensor 'd')"));
    temp_folder_free(folder);
    /* no weights at all */
    char *empty = temp_folder();
    assert_int_equal(weight_store_open(empty, &store), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "no model.safetensors"));
    temp_folder_free(empty);
}

/* Pages of data[0, bytes) present in this process's page tables (/proc/self/pagemap's bit 63), or -1. */
static long present_pages(const void *data, size_t bytes) {
    long page = sysconf(_SC_PAGESIZE), present = 0;
    FILE *map = fopen("/proc/self/pagemap", "rb");
    if (!map || page <= 0) {
        if (map) fclose(map);
        return -1;
    }
    for (uintptr_t at = (uintptr_t)data / (uintptr_t)page; at < ((uintptr_t)data + bytes) / (uintptr_t)page; at++) {
        uint64_t entry = 0;
        if (fseek(map, (long)(at * sizeof entry), SEEK_SET) || fread(&entry, sizeof entry, 1, map) != 1) {
            present = -1;
            break;
        }
        present += (long)(entry >> 63);
    }
    fclose(map);
    return present;
}

/* weight_store_release_prefix gives back the mapped pages of the tensors under a prefix (LLaVA's vision tower while
 * its language model answers), not those of the others, and the values read the same once mapped again. */
static void test_release_prefix(void **state) {
    (void)state;
    enum { N = 65536 }; /* 256 KiB of float32 each */
    float *data = malloc(2 * N * sizeof(float));
    for (size_t i = 0; i < 2 * N; i++) data[i] = (float)(i % 1000);
    char header[256];
    int n = snprintf(header, sizeof header, "{\"text.b\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%d]},"
                     "\"tower.a\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%d,%d]}}", N, 4 * N, N, 4 * N, 8 * N);
    while ((8 + n) % 64) header[n++] = ' '; /* the data aligned, so that both are read in place */
    header[n] = '\0';
    char *folder = temp_folder();
    write_tensors(folder, "model.safetensors", header, data, 2 * N * sizeof(float));
    weight_store *store;
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_OK);
    const float *tower, *text;
    size_t shape[1] = {N};
    assert_int_equal(weight_store_get(store, &tower, 1, shape, "tower.a"), GLIMPSE_STATUS_OK);
    assert_int_equal(weight_store_get(store, &text, 1, shape, "text.b"), GLIMPSE_STATUS_OK);
    double sum = 0, again = 0;
    for (size_t i = 0; i < N; i++) sum += tower[i] + text[i];
    long page = sysconf(_SC_PAGESIZE), pages = 4L * N / page;
    long tower_before = present_pages(tower, 4 * N), text_before = present_pages(text, 4 * N);
    if (tower_before < 0) skip(); /* no /proc/self/pagemap to read */
    assert_true(tower_before >= pages - 1 && text_before >= pages - 1);
    weight_store_release_prefix(store, "tower.");
    long tower_after = present_pages(tower, 4 * N), text_after = present_pages(text, 4 * N);
    printf("pages of 'tower.' %ld -> %ld after its release, of 'text.' %ld -> %ld\n", tower_before, tower_after,
           text_before, text_after);
    assert_true(tower_after <= 1);          /* a page it shares with the other tensor may stay */
    assert_int_equal(text_after, text_before);
    for (size_t i = 0; i < N; i++) again += tower[i] + text[i];
    assert_true(sum == again);
    weight_store_release_prefix(store, ""); /* an empty prefix releases nothing */
    assert_int_equal(present_pages(text, 4 * N), text_before);
    weight_store_free(store);
    temp_folder_free(folder);
    free(data);
}

/* Float32 tensors of at most 64 KiB (norms, biases) are read from a copy made once (a second ask, as tied weights
 * make, gets the same copy; copied_bytes counts conversions only), so reading them after an int8 twin gave back a
 * neighbour's pages does not map the neighbour again (a kernel may map a file's page cache a large folio at a
 * time); larger ones are read in place. */
static void test_small_tensors_copied(void **state) {
    (void)state;
    enum { N = 65536, SMALL = 256 };
    float *data = malloc((N + SMALL) * sizeof(float));
    for (size_t i = 0; i < N + SMALL; i++) data[i] = (float)(i % 1000) - 500.0f;
    char header[256];
    int n = snprintf(header, sizeof header, "{\"big\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%d]},"
                     "\"norm\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%d,%d]}}", N, 4 * N, SMALL,
                     4 * N, 4 * (N + SMALL));
    while ((8 + n) % 64) header[n++] = ' ';
    header[n] = '\0';
    char *folder = temp_folder();
    write_tensors(folder, "model.safetensors", header, data, (N + SMALL) * sizeof(float));
    weight_store *store;
    assert_int_equal(weight_store_open(folder, &store), GLIMPSE_STATUS_OK);
    const float *big, *norm, *again;
    assert_int_equal(weight_store_get(store, &big, 1, (size_t[]){N}, "big"), GLIMPSE_STATUS_OK);
    assert_int_equal(weight_store_get(store, &norm, 1, (size_t[]){SMALL}, "norm"), GLIMPSE_STATUS_OK);
    assert_ptr_equal(big, weight_store_find(store, "big")->data);
    assert_ptr_not_equal(norm, weight_store_find(store, "norm")->data);
    assert_memory_equal(norm, data + N, SMALL * sizeof(float));
    assert_int_equal(weight_store_get(store, &again, 1, (size_t[]){SMALL}, "norm"), GLIMPSE_STATUS_OK);
    assert_ptr_equal(again, norm);
    assert_int_equal(weight_store_copied_bytes(store), 0);
    double sum = 0;
    for (size_t i = 0; i < N; i++) sum += big[i];
    weight_store_release_pages(store, big, N * sizeof(float));
    for (size_t i = 0; i < SMALL; i++) sum += norm[i];
    long present = present_pages(big, N * sizeof(float));
    if (present >= 0) assert_true(present <= 1); /* (a page it shares with the header may stay) */
    assert_true(sum != 0);
    weight_store_free(store);
    temp_folder_free(folder);
    free(data);
}

static void test_config_fields(void **state) {
    (void)state;
    char *folder = temp_folder();
    const char *text = "{\"hidden_size\": 48, \"ratio\": 0.5, \"act\": \"gelu\", \"bad\": \"x\", \"big\": 1e12, "
                       "\"mean\": [1, 2, 3], \"none\": null}";
    write_file(folder, "config.json", text, strlen(text));
    cJSON *json;
    assert_int_equal(config_read_json(folder, "config.json", &json), GLIMPSE_STATUS_OK);
    int value;
    assert_int_equal(config_int(json, "config.json", "hidden_size", 1, 100, &value), GLIMPSE_STATUS_OK);
    assert_int_equal(value, 48);
    assert_int_equal(config_int(json, "config.json", "missing", 1, 100, &value), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "missing field \"missing\""));
    assert_int_equal(config_int(json, "config.json", "bad", 1, 100, &value), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(config_int(json, "config.json", "big", 1, 100, &value), GLIMPSE_STATUS_UNSUPPORTED);
    assert_int_equal(config_int(json, "config.json", "ratio", 1, 100, &value), GLIMPSE_STATUS_BAD_FORMAT);
    assert_int_equal(config_int_or(json, "config.json", "none", 1, 100, 7, &value), GLIMPSE_STATUS_OK);
    assert_int_equal(value, 7);
    double d;
    assert_int_equal(config_double_or(json, "config.json", "ratio", 0, &d), GLIMPSE_STATUS_OK);
    assert_float_equal(d, 0.5, 0);
    double three[3];
    assert_int_equal(config_doubles(json, "config.json", "mean", 3, three), GLIMPSE_STATUS_OK);
    assert_int_equal(config_doubles(json, "config.json", "mean", 2, three), GLIMPSE_STATUS_BAD_FORMAT);
    cJSON_Delete(json);
    write_file(folder, "broken.json", "{\"a\": ", 6);
    assert_int_equal(config_read_json(folder, "broken.json", &json), GLIMPSE_STATUS_BAD_FORMAT);
    assert_non_null(strstr(glimpse_last_error(), "not valid JSON"));
    assert_int_equal(config_read_json(folder, "absent.json", &json), GLIMPSE_STATUS_NOT_FOUND);
    temp_folder_free(folder);
}

static void test_hub_cache_resolution(void **state) {
    (void)state;
    char *cache = temp_folder();
    char path[1024];
    snprintf(path, sizeof path, "%s/models--someorg--some-model/snapshots/abc123", cache);
    char command[1200];
    snprintf(command, sizeof command, "mkdir -p %s %s/models--someorg--some-model/refs", path, cache);
    assert_int_equal(system(command), 0);
    snprintf(path, sizeof path, "%s/models--someorg--some-model/refs", cache);
    write_file(path, "main", "abc123\n", 7);
    setenv("HF_HUB_CACHE", cache, 1);
    char *folder;
    assert_int_equal(snapshot_resolve("someorg/some-model", &folder), GLIMPSE_STATUS_OK);
    snprintf(path, sizeof path, "%s/models--someorg--some-model/snapshots/abc123", cache);
    assert_string_equal(folder, path);
    free(folder);
    /* a refs/main line longer than any revision is not read cut short: the one snapshot is taken instead */
    char long_ref[400];
    memset(long_ref, 'a', sizeof long_ref);
    snprintf(path, sizeof path, "%s/models--someorg--some-model/refs", cache);
    write_file(path, "main", long_ref, sizeof long_ref);
    assert_int_equal(snapshot_resolve("someorg/some-model", &folder), GLIMPSE_STATUS_OK);
    snprintf(path, sizeof path, "%s/models--someorg--some-model/snapshots/abc123", cache);
    assert_string_equal(folder, path);
    free(folder);
    /* absent: the message says how to get it */
    assert_int_equal(snapshot_resolve("someorg/other-model", &folder), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "huggingface-cli download someorg/other-model"));
    /* HF_HOME is used when HF_HUB_CACHE is not set */
    unsetenv("HF_HUB_CACHE");
    setenv("HF_HOME", "/nonexistent-home", 1);
    char *where = snapshot_cache_folder();
    assert_string_equal(where, "/nonexistent-home/hub");
    free(where);
    unsetenv("HF_HOME");
    /* a path that does not exist and is not an id */
    assert_int_equal(snapshot_resolve("./no/such/folder", &folder), GLIMPSE_STATUS_NOT_FOUND);
    assert_non_null(strstr(glimpse_last_error(), "does not exist"));
    temp_folder_free(cache);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file),        cmocka_unit_test(test_damaged_headers),
        cmocka_unit_test(test_half_precision),    cmocka_unit_test(test_store_dtypes_and_shapes),
        cmocka_unit_test(test_sharded_store),     cmocka_unit_test(test_config_fields),
        cmocka_unit_test(test_hub_cache_resolution),
        cmocka_unit_test(test_release_prefix),
        cmocka_unit_test(test_small_tensors_copied),
        cmocka_unit_test(test_encoder_layers_by_names),
        cmocka_unit_test(test_attention_pool_by_names),
    };
    return cmocka_run_group_tests_name("weights", tests, NULL, NULL);
}
