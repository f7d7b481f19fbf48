/* cross_caption.h — the captioner of the families whose decoder reads the image through cross-attention:
 * BERT's (BLIP) and GPT-2's (ViT-GPT2), their prompt, state, image side and decoding as family_captioner hooks.
 * Not the families' loaders (families/blip.c, families/vit_gpt2.c) nor the decoder blocks (fusion/). */
#ifndef GLIMPSE_FAMILIES_CROSS_CAPTION_H
#define GLIMPSE_FAMILIES_CROSS_CAPTION_H

#include "families/family.h"

/* BLIP's text decoder (model->text_decoder, WordPiece; glimpse's settings BLIP's: 20 tokens, at least 5, 3
 * beams) and ViT-GPT2's GPT-2 (model->gpt2, byte-level BPE; transformers' GenerationConfig defaults: max_length
 * 20 with the start token, min_length 0, greedy). */
extern const family_captioner cross_caption_bert, cross_caption_gpt2;

#endif
