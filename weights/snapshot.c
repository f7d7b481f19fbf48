/* snapshot.c — model folder resolution, including the local hub cache. */
#include "weights/snapshot.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"

#define REPO_FOLDER_PREFIX "models--"
/* Room for a revision: a 40-digit commit hash, or a snapshot folder's name (at most 255 bytes). */
#define REVISION_CAPACITY 256

char *snapshot_cache_folder(void) {
    const char *hub_cache = getenv("HF_HUB_CACHE");
    if (hub_cache && hub_cache[0]) return strdup(hub_cache);
    const char *hf_home = getenv("HF_HOME");
    if (hf_home && hf_home[0]) return file_join(hf_home, "hub");
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0]) return file_join(xdg, "huggingface/hub");
    const char *home = getenv("HOME");
    if (home && home[0]) return file_join(home, ".cache/huggingface/hub");
    return NULL;
}

/* ORG/NAME or NAME: letters, digits, '-', '_', '.', at most one '/', not
 * starting with '.' or '/'. */
static int looks_like_hub_id(const char *text) {
    if (!text[0] || text[0] == '.' || text[0] == '/') return 0;
    int slashes = 0;
    for (const char *c = text; *c; c++) {
        if (*c == '/') {
            if (++slashes > 1 || c[1] == '\0' || c[1] == '.') return 0;
        } else if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                     *c == '_' || *c == '.')) {
            return 0;
        }
    }
    return strstr(text, "..") == NULL;
}

/* Reads the revision hash from refs/main (a single line); a line too long
 * for revision is not a revision. */
static int read_revision(const char *repo_folder, char *revision, size_t capacity) {
    char *ref = file_join(repo_folder, "refs/main");
    if (!ref) return 0;
    FILE *file = fopen(ref, "r");
    free(ref);
    if (!file) return 0;
    int ok = fgets(revision, (int)capacity, file) != NULL;
    int whole = ok && (strchr(revision, '\n') || fgetc(file) == EOF);
    fclose(file);
    if (!whole) return 0;
    revision[strcspn(revision, "\r\n")] = '\0';
    if (!revision[0] || strchr(revision, '/') || strcmp(revision, "..") == 0) return 0;
    return 1;
}

/* Without refs/main, a cache holding exactly one snapshot is unambiguous. */
static int only_snapshot(const char *snapshots, char *revision, size_t capacity) {
    DIR *dir = opendir(snapshots);
    if (!dir) return 0;
    int found = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (entry->d_name[0] == '.') continue;
        if (++found == 1) snprintf(revision, capacity, "%s", entry->d_name);
    }
    closedir(dir);
    return found == 1;
}

glimpse_status snapshot_resolve(const char *path_or_id, char **folder) {
    *folder = NULL;
    if (!path_or_id || !path_or_id[0]) return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "no model given");
    if (file_is_directory(path_or_id)) {
        *folder = strdup(path_or_id);
        return *folder ? GLIMPSE_STATUS_OK : ERROR_OOM();
    }
    if (file_is_regular(path_or_id))
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT,
                         "model '%s' is a file; give the snapshot folder that holds config.json and the weights",
                         path_or_id);
    if (!looks_like_hub_id(path_or_id))
        return error_set(GLIMPSE_STATUS_NOT_FOUND, "model folder '%s' does not exist", path_or_id);
    char *cache = snapshot_cache_folder();
    if (!cache)
        return error_set(GLIMPSE_STATUS_NOT_FOUND,
                         "model '%s' is not a folder, and no Hugging Face cache is known (set HF_HUB_CACHE)",
                         path_or_id);
    /* the cache's folder for ORG/NAME is models--ORG--NAME, sized to fit whatever the id's length */
    size_t length = strlen(path_or_id), at = strlen(REPO_FOLDER_PREFIX);
    char *repo_name = malloc(at + 2 * length + 1);
    if (!repo_name) {
        free(cache);
        return ERROR_OOM();
    }
    memcpy(repo_name, REPO_FOLDER_PREFIX, at);
    for (size_t i = 0; i < length; i++) {
        if (path_or_id[i] == '/') {
            repo_name[at++] = '-';
            repo_name[at++] = '-';
        } else {
            repo_name[at++] = path_or_id[i];
        }
    }
    repo_name[at] = '\0';
    glimpse_status status = GLIMPSE_STATUS_OK;
    char *repo = file_join(cache, repo_name);
    free(repo_name);
    char *snapshots = repo ? file_join(repo, "snapshots") : NULL;
    char revision[REVISION_CAPACITY];
    if (!repo || !snapshots) {
        status = ERROR_OOM();
    } else if (read_revision(repo, revision, sizeof revision) || only_snapshot(snapshots, revision, sizeof revision)) {
        char *candidate = file_join(snapshots, revision);
        if (!candidate) {
            status = ERROR_OOM();
        } else if (file_is_directory(candidate)) {
            *folder = candidate;
        } else {
            free(candidate);
            status = error_set(GLIMPSE_STATUS_NOT_FOUND,
                               "model '%s': the cache names revision %s but %s/snapshots/%s is missing; download it "
                               "again with: huggingface-cli download %s",
                               path_or_id, revision, repo, revision, path_or_id);
        }
    } else {
        status = error_set(GLIMPSE_STATUS_NOT_FOUND,
                           "model '%s' is neither a folder nor in the Hugging Face cache (%s); download it with: "
                           "huggingface-cli download %s   (or pass the folder it was saved to)",
                           path_or_id, repo, path_or_id);
    }
    free(snapshots);
    free(repo);
    free(cache);
    return status;
}
