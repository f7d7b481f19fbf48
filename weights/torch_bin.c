/* torch_bin.c — a PyTorch .bin's tensors: the archive's data.pkl read by
 * torch_pickle.c, each tensor resolved to ARCHIVE/data/KEY with its dtype,
 * shape, offset and extent checked against the storage. Row-major
 * contiguous tensors only (what state dicts hold); others are refused, not
 * copied. */
#include "weights/torch_bin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "weights/torch_pickle.h"
#include "weights/zip.h"

#define ZIP_MAGIC "PK\x03\x04"
#define STORAGE_KEY_MAX 64

/* The archive's data.pkl: the entry "ARCHIVE/data.pkl" (ARCHIVE: one folder name, the file's stem when
 * torch.save wrote it). */
static const zip_entry *find_pickle(const zip_archive *archive, size_t *prefix_length) {
    static const char suffix[] = "/data.pkl";
    size_t suffix_length = sizeof suffix - 1;
    for (size_t i = 0; i < archive->count; i++) {
        const zip_entry *entry = &archive->entries[i];
        if (entry->name_length <= suffix_length) continue;
        size_t prefix = entry->name_length - suffix_length;
        if (memcmp(entry->name + prefix, suffix, suffix_length) == 0 && !memchr(entry->name, '/', prefix)) {
            *prefix_length = prefix;
            return entry;
        }
    }
    return NULL;
}

/* ARCHIVE/NAME (name: NUL-terminated, of up to STORAGE_KEY_MAX + 8 bytes) in the archive, or NULL. */
static const zip_entry *find_in_archive(const zip_archive *archive, const char *prefix, size_t prefix_length,
                                        const char *name, size_t name_length) {
    for (size_t i = 0; i < archive->count; i++) {
        const zip_entry *entry = &archive->entries[i];
        if (entry->name_length == prefix_length + 1 + name_length && memcmp(entry->name, prefix, prefix_length) == 0 &&
            entry->name[prefix_length] == '/' && memcmp(entry->name + prefix_length + 1, name, name_length) == 0)
            return entry;
    }
    return NULL;
}

/* Strides of a row-major contiguous tensor (size-1 dimensions may have any stride, as torch allows). */
static int contiguous(const torch_pickle_tensor *t) {
    uint64_t expected = 1;
    for (int i = t->rank; i-- > 0;) {
        if (t->shape[i] == 0) return 1; /* no elements: nothing is read */
        if (t->shape[i] != 1 && t->stride[i] != expected) return 0;
        expected *= t->shape[i]; /* bounded: the caller has checked the product */
    }
    return 1;
}

/* One state dict entry as a tensor_entry pointing into its storage's bytes. */
static glimpse_status resolve(const char *label, const zip_archive *archive, const char *prefix, size_t prefix_length,
                              const torch_pickle_tensor *t, tensor_entry *entry) {
    int shown = t->name_length > 200 ? 200 : (int)t->name_length;
    uint64_t elements = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->shape[i] && elements > SIZE_MAX / t->element_size / t->shape[i])
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%.*s' has a shape too large to address", label,
                             shown, t->name);
        elements *= t->shape[i];
        entry->shape[i] = (size_t)t->shape[i];
    }
    if (!contiguous(t))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: tensor '%.*s' is stored with non-contiguous strides (a view "
                         "of another tensor's storage); only row-major contiguous tensors are read", label, shown,
                         t->name);
    if (t->key_length == 0 || t->key_length > STORAGE_KEY_MAX || memchr(t->key, '/', t->key_length))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%.*s' names an invalid storage key", label, shown,
                         t->name);
    char name[STORAGE_KEY_MAX + 8];
    int name_length = snprintf(name, sizeof name, "data/%.*s", (int)t->key_length, t->key);
    const zip_entry *storage = find_in_archive(archive, prefix, prefix_length, name, (size_t)name_length);
    if (!storage)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%.*s' names storage %s, which is not in the archive",
                         label, shown, t->name, name);
    if (t->storage_elements > SIZE_MAX / t->element_size || storage->size != t->storage_elements * t->element_size)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: storage %s holds %zu bytes, not the %llu elements of %zu "
                         "bytes its tensors declare", label, name, storage->size,
                         (unsigned long long)t->storage_elements, t->element_size);
    if (elements && (t->offset > t->storage_elements || elements > t->storage_elements - t->offset))
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%.*s' reads elements %llu..%llu of storage %s, which "
                         "holds %llu", label, shown, t->name, (unsigned long long)t->offset,
                         (unsigned long long)(t->offset + elements), name, (unsigned long long)t->storage_elements);
    entry->dtype = t->dtype;
    snprintf(entry->dtype_name, sizeof entry->dtype_name, "%s", t->dtype_name);
    entry->rank = t->rank;
    entry->elements = (size_t)elements;
    entry->data = storage->data + (elements ? (size_t)t->offset * t->element_size : 0);
    entry->bytes = (size_t)elements * t->element_size;
    entry->name = strndup(t->name, t->name_length);
    return entry->name ? GLIMPSE_STATUS_OK : ERROR_OOM();
}

static int compare_entries(const void *a, const void *b) {
    return strcmp(((const tensor_entry *)a)->name, ((const tensor_entry *)b)->name);
}

/* The archive's pickle checked (CRC, byte order) and read into file->entries. */
static glimpse_status read_archive(safetensors *file, const zip_archive *archive) {
    const char *label = file->label;
    size_t prefix_length = 0;
    const zip_entry *pickle = find_pickle(archive, &prefix_length);
    if (!pickle)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: a ZIP archive without ARCHIVE/data.pkl (not written by "
                         "torch.save)", label);
    if (zip_crc32(pickle->data, pickle->size) != pickle->crc32)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: data.pkl fails its CRC check (damaged file)", label);
    const zip_entry *order = find_in_archive(archive, pickle->name, prefix_length, "byteorder", 9);
    if (order && !(order->size == 6 && memcmp(order->data, "little", 6) == 0))
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: the tensors are not stored little-endian", label);
    torch_pickle_tensor *tensors;
    size_t count;
    glimpse_status status = torch_pickle_read(pickle->data, pickle->size, label, &tensors, &count);
    if (status) return status;
    file->entries = calloc(count ? count : 1, sizeof *file->entries);
    if (!file->entries) status = ERROR_OOM();
    for (size_t i = 0; !status && i < count; i++) {
        status = resolve(label, archive, pickle->name, prefix_length, &tensors[i], &file->entries[i]);
        if (!status) file->count++;
    }
    free(tensors);
    if (status) return status;
    qsort(file->entries, file->count, sizeof *file->entries, compare_entries);
    for (size_t i = 1; i < file->count; i++)
        if (strcmp(file->entries[i - 1].name, file->entries[i].name) == 0)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: tensor '%s' is listed twice", label,
                             file->entries[i].name);
    return GLIMPSE_STATUS_OK;
}

glimpse_status torch_bin_parse(const uint8_t *bytes, size_t size, const char *label, safetensors **out) {
    *out = NULL;
    if (!label) label = "pytorch_model.bin";
    if (size >= 2 && bytes[0] == 0x80 && bytes[1] <= 5)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: PyTorch's legacy (before 1.6) checkpoint format is not "
                         "read; load and save it again with a newer torch, or use a safetensors copy", label);
    if (size < 4 || memcmp(bytes, ZIP_MAGIC, 4) != 0)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: not a PyTorch checkpoint (no ZIP header)", label);
    safetensors *file = calloc(1, sizeof *file);
    if (!file) return ERROR_OOM();
    file->bytes = bytes;
    file->size = size;
    file->label = strdup(label);
    zip_archive archive;
    glimpse_status status = !file->label ? ERROR_OOM() : zip_read(bytes, size, label, &archive);
    if (!status) {
        status = read_archive(file, &archive);
        zip_free(&archive);
    }
    if (status) {
        safetensors_close(file);
        return status;
    }
    *out = file;
    return GLIMPSE_STATUS_OK;
}

glimpse_status torch_bin_open(const char *path, safetensors **out) {
    return tensor_file_open(path, torch_bin_parse, out);
}
