// sentencepiece.cc — the C interface of text/sentencepiece.h over Debian's
// libsentencepiece. Every entry point catches whatever the C++ side throws and
// returns a glimpse_status; nothing here prints.
//
// Why the library rather than a Viterbi of our own: a tokenizer's ids depend on
// the model file's own normaliser (nmt_nfkc with the precompiled charsmap saved
// in spiece.model, whitespace removal, the dummy prefix) as much as on the
// segmentation, and libsentencepiece is the code that wrote and reads those
// fields, so it normalises exactly as the Python package transformers calls.
#include "text/sentencepiece.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

extern "C" {
#include "core/error.h"
}

struct sentencepiece_model {
    sentencepiece::SentencePieceProcessor processor;
};

namespace {

// A second normalizer_spec (ModelProto field 3) holding only
// add_dummy_prefix (NormalizerSpec field 3) = false. Protocol buffers merge a
// repeated singular message field into the first, so appending these bytes is
// the same as transformers' `model.normalizer_spec.MergeFrom(spec)` with
// spec.add_dummy_prefix = False: that one field changes, the rest is kept.
const char kWithoutDummyPrefix[] = {0x1a, 0x02, 0x18, 0x00};

// ---- a walk over protocol-buffer fields, enough to edit and check a model
// before SentencePiece parses it

// Reads a varint at bytes[*at], moving *at past it.
bool read_varint(const uint8_t *bytes, size_t size, size_t *at, uint64_t *value) {
    *value = 0;
    for (int shift = 0; shift < 64 && *at < size; shift += 7) {
        const uint8_t byte = bytes[(*at)++];
        *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
        if (!(byte & 0x80)) return true;
    }
    return false;
}

struct proto_field {
    uint64_t number;
    size_t start, payload, end; // the tag, the value (after a length), one past the end
};

// Calls visit(field) for each field of the message in bytes[0, size).
// False if the bytes do not walk as a message (groups count as not walking).
template <typename Visit> bool walk_fields(const uint8_t *bytes, size_t size, Visit visit) {
    size_t at = 0;
    while (at < size) {
        proto_field field{};
        field.start = at;
        uint64_t tag = 0, length = 0;
        if (!read_varint(bytes, size, &at, &tag)) return false;
        const unsigned wire_type = static_cast<unsigned>(tag & 7);
        if (wire_type == 0 && !read_varint(bytes, size, &at, &length)) return false;
        if (wire_type == 2 && !read_varint(bytes, size, &at, &length)) return false;
        if (wire_type == 1) length = 8;
        if (wire_type == 5) length = 4;
        if (wire_type != 0 && wire_type != 1 && wire_type != 2 && wire_type != 5) return false;
        field.payload = at;
        if (wire_type != 0) {
            if (length > size - at) return false;
            at += static_cast<size_t>(length);
        }
        field.number = tag >> 3;
        field.end = at;
        visit(field);
    }
    return true;
}

constexpr uint64_t kModelNormalizerSpec = 3, kModelSelfTestData = 4, kNormalizerCharsMap = 2;

// The serialized ModelProto without its self_test_data. Loading runs those
// samples and, when they fail, which they do once the dummy prefix is off,
// prints them to stderr and refuses the model; they check a trainer's output,
// not an encoder's. Bytes that do not walk are kept whole, for the parser to
// refuse.
std::string without_self_test_data(const uint8_t *bytes, size_t size) {
    const std::string whole(reinterpret_cast<const char *>(bytes), size);
    std::string kept;
    kept.reserve(size);
    const bool walked = walk_fields(bytes, size, [&](const proto_field &field) {
        if (field.number != kModelSelfTestData) kept.append(whole, field.start, field.end - field.start);
    });
    return walked ? kept : whole;
}

// Darts-clone's double-array unit, as SentencePiece's normaliser reads it.
struct darts_unit {
    uint32_t bits;
    bool has_leaf() const { return (bits >> 8) & 1; }
    uint32_t value() const { return bits & ((1u << 31) - 1); }
    uint32_t label() const { return bits & ((1u << 31) | 0xff); }
    uint32_t offset() const { return (bits >> 10) << ((bits & (1u << 9)) >> 6); }
};

// Whether the normaliser's precompiled charsmap (a little-endian uint32 trie
// size, the trie's double array, then NUL-terminated replacement strings) can
// be searched without reading outside itself. SentencePiece trusts it: a
// damaged one makes Encode read out of bounds. Visits every node a search can
// reach, checking each place a search reads.
bool charsmap_is_sound(const std::string &blob) {
    if (blob.empty()) return true; // no charsmap: no trie is searched
    if (blob.size() <= 4) return false;
    const uint32_t trie_bytes = static_cast<uint32_t>(static_cast<uint8_t>(blob[0])) |
                                static_cast<uint32_t>(static_cast<uint8_t>(blob[1])) << 8 |
                                static_cast<uint32_t>(static_cast<uint8_t>(blob[2])) << 16 |
                                static_cast<uint32_t>(static_cast<uint8_t>(blob[3])) << 24;
    if (trie_bytes >= blob.size() - 4) return false;
    const size_t unit_count = trie_bytes / 4;
    const char *replacements = blob.data() + 4 + trie_bytes;
    const size_t replacement_bytes = blob.size() - 4 - trie_bytes;
    if (unit_count == 0) return false;
    auto unit = [&](size_t index) {
        darts_unit u{};
        std::memcpy(&u.bits, blob.data() + 4 + 4 * index, 4); // little-endian, as on the machines it runs on
        return u;
    };
    std::vector<bool> visited(unit_count, false);
    std::vector<size_t> pending{static_cast<size_t>(unit(0).offset())}; // node positions whose children are read
    while (!pending.empty()) {
        const size_t node = pending.back();
        pending.pop_back();
        if (node >= unit_count || visited[node]) continue;
        visited[node] = true;
        for (size_t byte = 0; byte < 256; byte++) {
            const size_t child = node ^ byte;
            if (child >= unit_count) return false;
            const darts_unit u = unit(child);
            if (u.label() != byte) continue;
            const size_t next = child ^ u.offset();
            if (next >= unit_count) return false;
            if (u.has_leaf()) {
                const size_t value = unit(next).value();
                if (value >= replacement_bytes || !std::memchr(replacements + value, 0, replacement_bytes - value))
                    return false;
            }
            pending.push_back(next);
        }
    }
    return true;
}

// The precompiled charsmap that parsing will keep: the last one given in any
// normalizer_spec. False if the bytes do not walk.
bool find_charsmap(const uint8_t *bytes, size_t size, std::string *charsmap) {
    charsmap->clear();
    bool inner_walked = true;
    const bool walked = walk_fields(bytes, size, [&](const proto_field &spec) {
        if (spec.number != kModelNormalizerSpec) return;
        const uint8_t *payload = bytes + spec.payload;
        inner_walked = inner_walked && walk_fields(payload, spec.end - spec.payload, [&](const proto_field &f) {
            if (f.number == kNormalizerCharsMap)
                charsmap->assign(reinterpret_cast<const char *>(payload + f.payload), f.end - f.payload);
        });
    });
    return walked && inner_walked;
}

glimpse_status status_of_exception() {
    try {
        throw;
    } catch (const std::bad_alloc &) {
        return ERROR_OOM();
    } catch (const std::exception &exception) {
        return error_set(GLIMPSE_STATUS_INTERNAL, "sentencepiece: %s", exception.what());
    } catch (...) {
        return error_set(GLIMPSE_STATUS_INTERNAL, "sentencepiece: unknown exception");
    }
}

}  // namespace

extern "C" glimpse_status sentencepiece_model_create(const uint8_t *bytes, size_t size, bool without_dummy_prefix,
                                                     sentencepiece_model **out) {
    *out = nullptr;
    try {
        std::string serialized = without_self_test_data(bytes, size);
        std::string charsmap;
        if (find_charsmap(bytes, size, &charsmap) && !charsmap_is_sound(charsmap))
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "the normaliser's precompiled charsmap is damaged");
        if (without_dummy_prefix) serialized.append(kWithoutDummyPrefix, sizeof kWithoutDummyPrefix);
        std::unique_ptr<sentencepiece_model> model(new sentencepiece_model);
        const sentencepiece::util::Status loaded = model->processor.LoadFromSerializedProto(serialized);
        if (!loaded.ok())
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "not a SentencePiece model: %s", loaded.message());
        if (model->processor.GetPieceSize() <= 0)
            return error_set(GLIMPSE_STATUS_BAD_FORMAT, "a SentencePiece model without pieces");
        *out = model.release();
        return GLIMPSE_STATUS_OK;
    } catch (...) {
        return status_of_exception();
    }
}

extern "C" void sentencepiece_model_free(sentencepiece_model *model) { delete model; }

extern "C" void sentencepiece_pieces_free(sentencepiece_pieces *pieces) {
    if (!pieces) return;
    std::free(pieces->text);
    std::free(pieces->starts);
    std::free(pieces->lengths);
    std::free(pieces->ids);
    *pieces = sentencepiece_pieces{};
}

extern "C" glimpse_status sentencepiece_encode(const sentencepiece_model *model, const char *text, size_t length,
                                               sentencepiece_pieces *out) {
    *out = sentencepiece_pieces{};
    try {
        std::vector<std::string> pieces;
        const sentencepiece::util::Status encoded = model->processor.Encode(std::string_view(text, length), &pieces);
        if (!encoded.ok()) return error_set(GLIMPSE_STATUS_INTERNAL, "sentencepiece: %s", encoded.message());
        size_t bytes = 0;
        for (const std::string &piece : pieces) bytes += piece.size() + 1;
        const size_t count = pieces.size();
        out->text = static_cast<char *>(std::malloc(bytes ? bytes : 1));
        out->starts = static_cast<size_t *>(std::calloc(count ? count : 1, sizeof(size_t)));
        out->lengths = static_cast<size_t *>(std::calloc(count ? count : 1, sizeof(size_t)));
        out->ids = static_cast<int32_t *>(std::calloc(count ? count : 1, sizeof(int32_t)));
        if (!out->text || !out->starts || !out->lengths || !out->ids) {
            sentencepiece_pieces_free(out);
            return ERROR_OOM();
        }
        size_t at = 0;
        for (size_t i = 0; i < count; i++) {
            std::memcpy(out->text + at, pieces[i].data(), pieces[i].size());
            out->text[at + pieces[i].size()] = '\0';
            out->starts[i] = at;
            out->lengths[i] = pieces[i].size();
            out->ids[i] = model->processor.PieceToId(pieces[i]);
            at += pieces[i].size() + 1;
        }
        out->count = count;
        return GLIMPSE_STATUS_OK;
    } catch (...) {
        sentencepiece_pieces_free(out);
        return status_of_exception();
    }
}

extern "C" int32_t sentencepiece_piece_id(const sentencepiece_model *model, const char *piece) {
    try {
        return model->processor.PieceToId(piece);
    } catch (...) {
        return model->processor.unk_id();
    }
}

extern "C" size_t sentencepiece_piece_count(const sentencepiece_model *model) {
    return static_cast<size_t>(model->processor.GetPieceSize());
}

extern "C" const char *sentencepiece_id_piece(const sentencepiece_model *model, int32_t id) {
    try {
        if (id < 0 || id >= model->processor.GetPieceSize()) return "";
        return model->processor.IdToPiece(id).c_str(); // a reference into the model: lives as long as it
    } catch (...) {
        return "";
    }
}

extern "C" glimpse_status sentencepiece_decode_pieces(const sentencepiece_model *model, const char *const *pieces,
                                                      size_t count, char **out) {
    *out = nullptr;
    try {
        std::vector<std::string> list(pieces, pieces + count);
        std::string text;
        const sentencepiece::util::Status decoded = model->processor.Decode(list, &text);
        if (!decoded.ok()) return error_set(GLIMPSE_STATUS_INTERNAL, "sentencepiece: %s", decoded.message());
        *out = static_cast<char *>(std::malloc(text.size() + 1));
        if (!*out) return ERROR_OOM();
        std::memcpy(*out, text.data(), text.size());
        (*out)[text.size()] = '\0';
        return GLIMPSE_STATUS_OK;
    } catch (...) {
        return status_of_exception();
    }
}
