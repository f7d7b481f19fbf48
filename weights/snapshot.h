/* snapshot.h — finding a model's folder: a path to a snapshot folder, or a
 * hub id ("openai/clip-vit-base-patch32") looked up in the local Hugging Face
 * cache exactly as the hub's own tools lay it out. Never downloads. */
#ifndef GLIMPSE_WEIGHTS_SNAPSHOT_H
#define GLIMPSE_WEIGHTS_SNAPSHOT_H

#include "glimpse.h"

/* The hub cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else
 * ~/.cache/huggingface/hub. Caller frees. NULL if no home is known. */
char *snapshot_cache_folder(void);

/* Resolves path_or_id to a folder. A path that exists is used as it is; an
 * id ORG/NAME is looked up as CACHE/models--ORG--NAME/snapshots/REVISION with
 * REVISION read from refs/main. Caller frees *folder. When nothing is found
 * the error says where it looked and how to download the model. */
glimpse_status snapshot_resolve(const char *path_or_id, char **folder);

#endif
