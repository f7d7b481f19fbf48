/* explain_json.h — an explanation as JSON, the same in `glimpse explain --json` (tools/cli_explain.c) and in
 * glimpse serve's POST /v1/explain (serve/routes.c): both write through these, so their grids cannot differ. */
#ifndef GLIMPSE_OUTPUT_EXPLAIN_JSON_H
#define GLIMPSE_OUTPUT_EXPLAIN_JSON_H

#include <stdio.h>

#include "glimpse.h"

/* The fields after the first (each written after ", "): "caption" and "ids" (captioning models; with a
 * question, "question" and "answer" without the whitespace around it, as `glimpse ask` prints it) or "text"
 * and "probability" (ITM) or "score" (CLIP, SigLIP) when there is a text, then "grid_size": [rows, columns],
 * "words": [{"word", "tokens", "grid"}, with "queries": [weights] for BLIP-2] and "maps": [{"kind", "grid"}],
 * grids as rows top to bottom. question: NULL but for an explained answer. */
void explain_json_fields(FILE *out, glimpse_model_kind kind, const char *question,
                         const glimpse_explanation *explanation);

#endif
