/* test_torch_bin.c — PyTorch .bin checkpoints: florence2-tiny's
 * pytorch_model.bin bit for bit against its model.safetensors (skipped
 * without the fixtures), the small float16/bfloat16 files (ZIP64 layout
 * too) and hostile or damaged ones tests/data/make_torch_bin.py writes
 * without torch (each refused with a message naming what), and snapshot
 * folders holding .bin files, single and sharded, opened by the store. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/file.h"
#include "support.h"
#include "weights/safetensors.h"
#include "weights/store.h"
#include "weights/torch_bin.h"

#define DATA GLIMPSE_SOURCE_DIR "/tests/data/torch_bin/"

static const tensor_entry *find(const safetensors *file, const char *name) {
    const tensor_entry *entry = safetensors_find(file, name);
    if (!entry) fail_msg("%s: no tensor '%s'", file->label, name);
    return entry;
}

static void expect_values(weight_store *store, const char *name, int rank, const size_t *shape, const float *expected,
                          size_t count) {
    const float *values;
    if (weight_store_get(store, &values, rank, shape, name)) fail_msg("%s: %s", name, glimpse_last_error());
    for (size_t i = 0; i < count; i++)
        if (values[i] != expected[i]) fail_msg("%s[%zu] = %g, expected %g", name, i, values[i], expected[i]);
}

/* The values make_torch_bin.py stores (all exact in float16 and bfloat16). */
static const float half_values[10] = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 1024.0f, 0.125f, -2.5f, 65504.0f, -0.0f};

static void test_float16_file(void **state) {
    (void)state;
    safetensors *file;
    if (torch_bin_open(DATA "f16.bin", &file)) fail_msg("%s", glimpse_last_error());
    assert_int_equal(file->count, 7);
    const tensor_entry *shared = find(file, "model.shared.weight");
    const tensor_entry *alias = find(file, "model.encoder.embed_tokens.weight");
    const tensor_entry *tail = find(file, "model.tail"), *scalar = find(file, "model.scalar");
    assert_int_equal(shared->dtype, TENSOR_DTYPE_F16);
    assert_string_equal(shared->dtype_name, "F16");
    assert_int_equal(shared->rank, 2);
    assert_int_equal(shared->shape[0], 2);
    assert_int_equal(shared->shape[1], 3);
    assert_int_equal(shared->bytes, 12);
    assert_ptr_equal(alias->data, shared->data); /* one storage, no copy */
    assert_ptr_equal(tail->data, shared->data + 12);
    assert_int_equal(tail->elements, 4);
    assert_int_equal(scalar->rank, 0);
    assert_int_equal(scalar->elements, 1);
    assert_ptr_equal(scalar->data, shared->data + 18);
    assert_int_equal(find(file, "model.norm.weight")->dtype, TENSOR_DTYPE_BF16);
    assert_int_equal(find(file, "model.position_ids")->dtype, TENSOR_DTYPE_OTHER);
    assert_string_equal(find(file, "model.position_ids")->dtype_name, "I64");
    assert_int_equal(find(file, "model.proj.weight")->dtype, TENSOR_DTYPE_F32);

    /* the same archive with every size and offset in ZIP64 fields, as torch writes files over 4 GiB */
    safetensors *zip64;
    if (torch_bin_open(DATA "zip64.bin", &zip64)) fail_msg("%s", glimpse_last_error());
    assert_int_equal(zip64->count, file->count);
    for (size_t i = 0; i < file->count; i++) {
        assert_string_equal(zip64->entries[i].name, file->entries[i].name);
        assert_int_equal(zip64->entries[i].bytes, file->entries[i].bytes);
        assert_memory_equal(zip64->entries[i].data, file->entries[i].data, file->entries[i].bytes);
    }
    safetensors_close(zip64);

    weight_store *store;
    assert_int_equal(weight_store_from_file(file, &store), GLIMPSE_STATUS_OK);
    expect_values(store, "model.shared.weight", 2, (size_t[]){2, 3}, half_values, 6);
    expect_values(store, "model.tail", 1, (size_t[]){4}, half_values + 6, 4);
    expect_values(store, "model.scalar", 0, NULL, half_values + 9, 1);
    expect_values(store, "model.norm.weight", 1, (size_t[]){3}, (const float[]){1.5f, -3.0f, 0.25f}, 3);
    expect_values(store, "model.proj.weight", 2, (size_t[]){2, 1}, (const float[]){0.1f, -7.0f}, 2);
    const float *ids;
    assert_int_equal(weight_store_get(store, &ids, 2, (size_t[]){1, 3}, "model.position_ids"),
                     GLIMPSE_STATUS_UNSUPPORTED);
    assert_string_equal(weight_store_dtype(store), "mixed");
    weight_store_free(store);
}

static char *temp_folder(void) {
    char *folder = strdup("/tmp/glimpse-torch-bin-XXXXXX");
    assert_non_null(mkdtemp(folder));
    return folder;
}

static void link_into(const char *folder, const char *target, const char *name) {
    char *path = file_join(folder, name);
    assert_int_equal(symlink(target, path), 0);
    free(path);
}

static void remove_folder(char *folder, const char *const *names) {
    for (; *names; names++) {
        char *path = file_join(folder, *names);
        unlink(path);
        free(path);
    }
    rmdir(folder);
    free(folder);
}

static void test_store_opens_bin_folders(void **state) {
    (void)state;
    char *single = temp_folder();
    link_into(single, DATA "f16.bin", "pytorch_model.bin");
    weight_store *store;
    if (weight_store_open(single, &store)) fail_msg("%s", glimpse_last_error());
    assert_string_equal(weight_store_format(store), "PyTorch .bin");
    expect_values(store, "model.encoder.embed_tokens.weight", 2, (size_t[]){2, 3}, half_values, 6);
    assert_string_equal(weight_store_dtype(store), "F16");
    weight_store_free(store);
    /* beside a model.safetensors, the safetensors file is the one read */
    static const char header[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}    ";
    uint8_t safetensors_bytes[8 + sizeof header - 1 + 4] = {sizeof header - 1};
    memcpy(safetensors_bytes + 8, header, sizeof header - 1);
    char *path = file_join(single, "model.safetensors");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(safetensors_bytes, 1, sizeof safetensors_bytes, f), sizeof safetensors_bytes);
    fclose(f);
    free(path);
    assert_int_equal(weight_store_open(single, &store), GLIMPSE_STATUS_OK);
    assert_string_equal(weight_store_format(store), "safetensors");
    assert_non_null(weight_store_find(store, "x"));
    assert_null(weight_store_find(store, "model.tail"));
    weight_store_free(store);
    remove_folder(single, (const char *const[]){"pytorch_model.bin", "model.safetensors", NULL});

    static const char *const shards[] = {"pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin",
                                         "pytorch_model.bin.index.json", NULL};
    char *sharded = temp_folder();
    for (int i = 0; shards[i]; i++) {
        char target[512];
        snprintf(target, sizeof target, DATA "%s", shards[i]);
        link_into(sharded, target, shards[i]);
    }
    if (weight_store_open(sharded, &store)) fail_msg("%s", glimpse_last_error());
    assert_string_equal(weight_store_format(store), "PyTorch .bin");
    expect_values(store, "model.shared.weight", 2, (size_t[]){2, 3}, half_values, 6);
    expect_values(store, "model.tail", 1, (size_t[]){4}, half_values + 6, 4);
    expect_values(store, "model.norm.weight", 1, (size_t[]){3}, (const float[]){1.5f, -3.0f, 0.25f}, 3);
    expect_values(store, "model.proj.weight", 2, (size_t[]){2, 1}, (const float[]){0.1f, -7.0f}, 2);
    weight_store_free(store);
    remove_folder(sharded, shards);
}

/* Every hostile or damaged file is refused with this status and a message naming the cause and the file. */
static void test_refused_files(void **state) {
    (void)state;
    static const struct {
        const char *file;
        glimpse_status status;
        const char *needle;
    } cases[] = {
        {"os_system.bin", GLIMPSE_STATUS_BAD_FORMAT, "pickle offset 2 (GLOBAL): global 'os.system' refused"},
        {"posix_system.bin", GLIMPSE_STATUS_BAD_FORMAT, "global 'posix.system' refused"},
        {"builtins_eval.bin", GLIMPSE_STATUS_BAD_FORMAT, "global 'builtins.eval' refused"},
        {"load_from_bytes.bin", GLIMPSE_STATUS_BAD_FORMAT, "global 'torch.storage._load_from_bytes' refused"},
        {"stack_global.bin", GLIMPSE_STATUS_BAD_FORMAT, "global 'os.system' refused"},
        {"inst.bin", GLIMPSE_STATUS_BAD_FORMAT, "(INST): opcode 0x69"},
        {"newobj.bin", GLIMPSE_STATUS_BAD_FORMAT, "(NEWOBJ): opcode 0x81"},
        {"wrong_args.bin", GLIMPSE_STATUS_BAD_FORMAT, "REDUCE of torch._utils._rebuild_tensor_v2 with arguments"},
        {"storage_call.bin", GLIMPSE_STATUS_BAD_FORMAT, "REDUCE of something other"},
        {"memo_range.bin", GLIMPSE_STATUS_BAD_FORMAT, "(BINGET): memo index 7 was never stored"},
        {"stack_underflow.bin", GLIMPSE_STATUS_BAD_FORMAT, "(SETITEM): the opcode needs 2 values"},
        {"no_stop.bin", GLIMPSE_STATUS_BAD_FORMAT, "without STOP"},
        {"not_a_dict.bin", GLIMPSE_STATUS_BAD_FORMAT, "no dict of tensors"},
        {"mark_bomb.bin", GLIMPSE_STATUS_BAD_FORMAT, "pickle offset 4098 (MARK): MARKs nest deeper than 4096"},
        {"memo_bomb.bin", GLIMPSE_STATUS_BAD_FORMAT, "(LONG_BINPUT): memo index 4294967295 is out of range"},
        {"string_bomb.bin", GLIMPSE_STATUS_BAD_FORMAT, "(BINUNICODE): a string of 4294967280 bytes (over 1048576)"},
        {"offset_past_data.bin", GLIMPSE_STATUS_BAD_FORMAT, "reads elements 8..12 of storage data/0, which holds 10"},
        {"huge_shape.bin", GLIMPSE_STATUS_BAD_FORMAT, "reads elements 0..2305843009213693952"},
        {"huge_storage.bin", GLIMPSE_STATUS_BAD_FORMAT, "not the 1099511627776 elements"},
        {"strided.bin", GLIMPSE_STATUS_UNSUPPORTED, "non-contiguous strides"},
        {"missing_storage.bin", GLIMPSE_STATUS_BAD_FORMAT, "storage data/0, which is not in the archive"},
        {"deflated.bin", GLIMPSE_STATUS_UNSUPPORTED, "is compressed (method 8)"},
        {"truncated.bin", GLIMPSE_STATUS_BAD_FORMAT, "no ZIP end-of-central-directory record"},
        {"legacy.bin", GLIMPSE_STATUS_UNSUPPORTED, "legacy (before 1.6)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, DATA "%s", cases[i].file);
        safetensors *file = NULL;
        glimpse_status status = torch_bin_open(path, &file);
        if (status == GLIMPSE_STATUS_OK) fail_msg("%s was accepted", cases[i].file);
        assert_null(file);
        if (status != cases[i].status || !strstr(glimpse_last_error(), cases[i].needle) ||
            !strstr(glimpse_last_error(), cases[i].file))
            fail_msg("%s: status %d, error \"%s\"; expected status %d and \"%s\"", cases[i].file, status,
                     glimpse_last_error(), cases[i].status, cases[i].needle);
    }
}

/* florence2-tiny's pytorch_model.bin holds every tensor of its model.safetensors, bit for bit, and the token
 * table's two embed_tokens aliases share its storage. */
static void test_florence2_bin_equals_safetensors(void **state) {
    (void)state;
    if (!fixtures_folder()) skip();
    char *bin_path = fixture_path("florence2-tiny/pytorch_model.bin");
    safetensors *bin;
    if (torch_bin_open(bin_path, &bin)) fail_msg("%s", glimpse_last_error());
    safetensors *reference = fixture_tensors("florence2-tiny/model.safetensors");
    assert_non_null(reference);
    assert_int_equal(bin->count, 277);
    assert_int_equal(reference->count, 275);
    for (size_t i = 0; i < reference->count; i++) {
        const tensor_entry *want = &reference->entries[i], *got = find(bin, want->name);
        assert_int_equal(got->dtype, want->dtype);
        assert_int_equal(got->rank, want->rank);
        for (int d = 0; d < want->rank; d++) assert_int_equal(got->shape[d], want->shape[d]);
        assert_int_equal(got->bytes, want->bytes);
        if (memcmp(got->data, want->data, want->bytes) != 0) fail_msg("tensor '%s' differs", want->name);
    }
    const tensor_entry *shared = find(bin, "language_model.model.shared.weight");
    static const char *const aliases[] = {"language_model.model.encoder.embed_tokens.weight",
                                          "language_model.model.decoder.embed_tokens.weight",
                                          "language_model.lm_head.weight"};
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(find(bin, aliases[i])->data, shared->data);
        assert_int_equal(find(bin, aliases[i])->bytes, shared->bytes);
    }
    safetensors_close(reference);
    safetensors_close(bin);

    /* a snapshot folder holding only the .bin loads through the store, float32 as stored (this small tensor read
     * from a copy, as every float32 tensor of at most 64 KiB: weights/store.c) */
    char *folder = temp_folder();
    link_into(folder, bin_path, "pytorch_model.bin");
    weight_store *store;
    if (weight_store_open(folder, &store)) fail_msg("%s", glimpse_last_error());
    const float *values;
    assert_int_equal(weight_store_get(store, &values, 2, (size_t[]){54, 20}, "image_projection"), GLIMPSE_STATUS_OK);
    assert_memory_equal(values, weight_store_find(store, "image_projection")->data, 54 * 20 * sizeof(float));
    assert_int_equal(weight_store_copied_bytes(store), 0);
    assert_string_equal(weight_store_dtype(store), "F32");
    assert_string_equal(weight_store_format(store), "PyTorch .bin");
    weight_store_free(store);
    remove_folder(folder, (const char *const[]){"pytorch_model.bin", NULL});
    free(bin_path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float16_file),
        cmocka_unit_test(test_store_opens_bin_folders),
        cmocka_unit_test(test_refused_files),
        cmocka_unit_test(test_florence2_bin_equals_safetensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
