/* explain_json.h — an explanation as JSON, the same in `glimpse explain --json` (tools/cli_explain.c) and in
 * glimpse serve's POST /v1/explain (serve/routes.c): both write through these, so their grids cannot differ. */
#ifndef GLIMPSE_EXPLAIN_JSON_H
#define GLIMPSE_EXPLAIN_JSON_H

#include <stdio.h>

#include "glimpse.h"

/* The fields after the first (each written after ", "): "caption" and "ids" (captioning models) or "text" and
 * "probability" (ITM) or "score" (CLIP, SigLIP) when there is a text, then "grid_size": [rows, columns],
 * "words": [{"word", "tokens", "grid"}] and "maps": [{"kind", "grid"}], grids as rows top to bottom. */
void explain_json_fields(FILE *out, glimpse_model_kind kind, const glimpse_explanation *explanation);

#endif
