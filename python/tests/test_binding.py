"""test_binding.py — the Python binding against the C library: the same embeddings, scores, captions and
search results as the glimpse CLI on the demo models, the same as transformers on the reference
fixtures, every image source (paths, bytes, numpy views), errors, callbacks, and threads without the GIL."""

import ctypes
import io
import json
import os
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest
from PIL import Image as PILImage

import glimpse
from conftest import DEMO_CAPTION, DEMO_CLIP, fixture, glimpse_cli, read_safetensors


def cli_embeddings(model, *arguments):
    return np.array([row["embedding"] for row in glimpse_cli("embed", "-m", model, "--json", *arguments)],
                    dtype=np.float32)


# --------------------------------------------------------- equal to the CLI

def test_image_embeddings_equal_the_cli(demo_clip, pictures):
    # the CLI prints 9 significant digits, which give back every float32 exactly
    expected = cli_embeddings(DEMO_CLIP, *[a for p in pictures for a in ("-i", p)])
    got = demo_clip.embed_images(pictures)
    assert got.dtype == np.float32 and got.shape == (len(pictures), demo_clip.embedding_dim)
    np.testing.assert_array_equal(got, expected)


def test_text_embeddings_and_rank_equal_the_cli(demo_clip, pictures):
    texts = ["a red circle", "a green square left of a red triangle", "a yellow triangle"]
    expected = cli_embeddings(DEMO_CLIP, *[a for t in texts for a in ("-t", t)])
    np.testing.assert_array_equal(demo_clip.embed_texts(texts), expected)
    scores = demo_clip.rank(pictures, texts)
    assert scores.shape == (len(pictures), len(texts))
    for t, row in enumerate(glimpse_cli("rank", "-m", DEMO_CLIP, "--json", *[a for x in texts for a in ("-t", x)],
                                        *pictures)):
        assert row["text"] == texts[t]
        order = np.argsort(-scores[:, t], kind="stable")
        assert [r["image"] for r in row["results"]] == [pictures[i] for i in order]
        np.testing.assert_allclose([r["score"] for r in row["results"]], scores[order, t], rtol=0, atol=1e-4)


def test_a_text_holding_nul_is_refused(demo_clip, demo_caption, pictures):
    """The library's texts are C strings, which end at a NUL: such a text is refused, not embedded cut short."""
    for call in (lambda: demo_clip.embed_texts(["a red\0 circle"]), lambda: demo_clip.embed_query("a red\0 circle"),
                 lambda: demo_caption.caption(pictures[:1], prompt="a photo\0 of")):
        with pytest.raises(ValueError, match="NUL"):
            call()


def test_captions_equal_the_cli_and_stream_tokens(demo_caption, pictures):
    expected = glimpse_cli("caption", "-m", DEMO_CAPTION, "--json", *pictures)
    assert [(c.text, c.ids) for c in demo_caption.caption(pictures)] == [(e["caption"], e["ids"]) for e in expected]
    tokens = []
    greedy = demo_caption.caption(pictures[:2], beams=1,
                                  on_token=lambda image, id, text: tokens.append((image, id, text)))
    for image, caption in enumerate(greedy):
        mine = [t for t in tokens if t[0] == image]
        assert [t[1] for t in mine] == caption.ids[1:]  # every token after the start token, in order
        assert mine[-1][2] == caption.text


def test_a_token_callback_cancels_and_its_exception_is_raised(demo_caption, pictures):
    with pytest.raises(glimpse.CancelledError):
        demo_caption.caption(pictures[:1], beams=1, on_token=lambda image, id, text: True)

    def broken(image, id, text):
        raise KeyError("from the callback")
    with pytest.raises(KeyError, match="from the callback"):
        demo_caption.caption(pictures[:1], beams=1, on_token=broken)


# ------------------------------------------------------- equal to transformers

@pytest.mark.parametrize("name, logits", [("clip-tiny", "logits_per_image"), ("siglip-tiny", "logits_per_image")])
def test_embedding_fixtures_equal_transformers(name, logits):
    folder = fixture(name)
    expected = json.loads((folder / "expected.json").read_text())
    reference = read_safetensors(folder / "reference.safetensors")
    model = glimpse.Model(folder)
    images = model.embed_images([folder.parent / "images" / image for image in expected["images"]])
    texts = model.embed_texts(expected["texts"])
    np.testing.assert_allclose(images, reference["image_embeds"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(texts, reference["text_embeds"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(model.score(images, texts), expected[logits], rtol=1e-5, atol=1e-5)
    assert [model.tokenize(text) for text in expected["texts"]] == expected["input_ids"]


def test_blip_caption_fixture_equals_transformers():
    folder = fixture("blip-caption-tiny")
    expected = json.loads((folder / "expected.json").read_text())
    model = glimpse.Model(folder)
    for case in expected["cases"]:
        params = case["params"]
        # transformers' lengths count the start token and the prompt; glimpse's count new tokens
        prompt_length = len(model.tokenize(case["prompt"])) - 1 if case["prompt"] else 1
        caption, = model.caption([folder.parent / "images" / case["image"]], prompt=case["prompt"] or None,
                                 beams=params.get("num_beams", 1), max_tokens=params["max_length"] - prompt_length,
                                 min_tokens=max(params.get("min_length", 0) - prompt_length, 0))
        assert caption.ids == case["ids"], case
        assert caption.text == case["caption"]


def test_blip2_answers_and_captions_equal_transformers():
    # every case of the blip2-opt-tiny fixture: captions without a prompt, answers to its question (BLIP-2's
    # prompt "Question: ... Answer:") through ask(question=) for the four images in one call, and the same
    # through ask(prompt=) with the prompt written out
    folder = fixture("blip2-opt-tiny")
    expected = json.loads((folder / "expected.json").read_text())
    question = "what is in the picture?"
    assert expected["prompt"] == f"Question: {question} Answer:"
    model = glimpse.Model(folder)
    assert model.kind == "blip2"

    def settings(params):  # max_length counts the start token 2; max_new_tokens does not
        return {"beams": params.get("num_beams", 1), "min_tokens": 0,
                "max_tokens": params["max_new_tokens"] if "max_new_tokens" in params else params["max_length"] - 1}
    asked = [case for case in expected["cases"] if case["prompt"]]
    assert len(asked) == 4 and len({json.dumps(case["params"]) for case in asked}) == 1
    images = [folder.parent / "images" / case["image"] for case in asked]
    answers = model.ask(images, question=question, **settings(asked[0]["params"]))
    assert [(a.text, a.ids) for a in answers] == [(case["caption"], case["ids"]) for case in asked]
    prompted = model.ask(images[:2], prompt=expected["prompt"], **settings(asked[0]["params"]))
    assert prompted == answers[:2]
    for case in expected["cases"]:
        if not case["prompt"]:
            caption, = model.caption([folder.parent / "images" / case["image"]], **settings(case["params"]))
            assert (caption.text, caption.ids) == (case["caption"], case["ids"]), case

    # the words stream as they come, the text so far ending as the answer; a callback cancels
    tokens = []
    answer, = model.ask(images[1], question="what is it?", on_token=lambda image, id, text: tokens.append((id, text)))
    assert [id for id, _ in tokens] == answer.ids[1:] and tokens[-1][1] == answer.text
    with pytest.raises(glimpse.CancelledError):
        model.ask(images[:1], question=question, on_token=lambda image, id, text: True)
    # refusals: neither or both of question and prompt, too many tokens for OPT's positions (glimpse's message)
    with pytest.raises(ValueError):
        model.ask(images[:1])
    with pytest.raises(ValueError):
        model.ask(images[:1], question=question, prompt=expected["prompt"])
    with pytest.raises(glimpse.GlimpseError, match="positions") as error:
        model.ask(images[:1], question=question, max_tokens=45)
    assert error.value.status == "TOO_LARGE"


def test_only_blip2_answers_questions(demo_caption, pictures):
    with pytest.raises(glimpse.GlimpseError, match="BLIP-2") as error:
        demo_caption.ask(pictures[:1], question="what is it?")
    assert error.value.status == "WRONG_MODEL"
    # a free prompt is a caption's, as `glimpse ask --prompt` takes it from any captioning model
    assert demo_caption.ask(pictures[:1], prompt="a picture of") == demo_caption.caption(pictures[:1],
                                                                                         prompt="a picture of")


def test_blip_retrieval_fixture_equals_transformers():
    folder = fixture("blip-itm-tiny")
    expected = json.loads((folder / "expected.json").read_text())
    model = glimpse.Model(folder)
    images = [folder.parent / "images" / name for name in expected["images"]]
    np.testing.assert_allclose(model.rank(images, expected["texts"]), expected["itm_match_probability"],
                               rtol=0, atol=1e-5)
    np.testing.assert_allclose(model.rank(images, expected["texts"], mode="itc"), expected["itc_cosine"],
                               rtol=0, atol=1e-5)


# ------------------------------------------------------------ image sources

def test_bytes_and_numpy_arrays_give_the_same_embeddings(demo_clip, pictures):
    from_files = demo_clip.embed_images(pictures[:3])
    from_bytes = demo_clip.embed_images([open(p, "rb").read() for p in pictures[:3]])
    arrays = [np.asarray(PILImage.open(p).convert("RGB")) for p in pictures[:3]]
    np.testing.assert_array_equal(from_bytes, from_files)
    np.testing.assert_array_equal(demo_clip.embed_images(arrays), from_files)
    # one alone (a batch of one: an embedding may differ in its last bit with the batch it is in)
    np.testing.assert_array_equal(demo_clip.embed_images(arrays[0]), demo_clip.embed_images(pictures[0]))


def test_numpy_arrays_that_are_not_c_contiguous(demo_clip, pictures):
    pixels = np.asarray(PILImage.open(pictures[0]).convert("RGB"))
    # a Fortran-ordered copy, a crop whose rows are apart, every other column, a flipped view, and
    # BGR channels reversed back to RGB: each must be read as the pixels it shows
    fortran = np.asfortranarray(pixels)
    crop = pixels[10:200, 20:180]
    columns = pixels[:, ::2]
    flipped = pixels[::-1]
    bgr = np.ascontiguousarray(pixels[:, :, ::-1])[:, :, ::-1]
    views = [fortran, crop, columns, flipped, bgr]
    assert not any(v.flags["C_CONTIGUOUS"] for v in views[1:]) and not fortran.flags["C_CONTIGUOUS"]
    # one at a time: an embedding may differ in its last bit with its place in a batch
    got = demo_clip.embed_images(views, batch_size=1)
    want = demo_clip.embed_images([np.ascontiguousarray(v) for v in views], batch_size=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[0], got[4])
    assert not np.array_equal(got[0], got[1])  # the crop is another picture
    rgba = np.concatenate([pixels, np.full(pixels.shape[:2] + (1,), 255, np.uint8)], axis=2)
    np.testing.assert_array_equal(demo_clip.embed_images([rgba]), got[:1])


def test_dot_rows_scores_stored_rows_in_place(tmp_path):
    """glimpse.dot_rows gives matrix[rows] @ query (within float rounding) from an array and from a read-only
    memory map, on one thread and on all, with the rows in any order or none given; a row outside the matrix,
    a wrong query size or a matrix that is not C-contiguous float32 is refused."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((5000, 96)).astype(np.float32)
    np.save(tmp_path / "m.npy", matrix)
    mapped = np.load(tmp_path / "m.npy", mmap_mode="r")
    query = rng.standard_normal(96).astype(np.float32)
    rows = rng.integers(0, 5000, 3000)
    expected = (matrix.astype(np.float64) @ query.astype(np.float64))
    for source in (matrix, mapped):
        for threads in (1, 0):
            np.testing.assert_allclose(glimpse.dot_rows(source, query, rows, threads), expected[rows], rtol=0, atol=1e-4)
            np.testing.assert_allclose(glimpse.dot_rows(source, query, np.sort(rows), threads), expected[np.sort(rows)],
                                       rtol=0, atol=1e-4)
            np.testing.assert_allclose(glimpse.dot_rows(source, query, None, threads), expected, rtol=0, atol=1e-4)
    assert glimpse.dot_rows(matrix, query, []).shape == (0,)
    for bad in (5000, -1):
        with pytest.raises(ValueError, match="outside a matrix of 5000 rows"):
            glimpse.dot_rows(matrix, query, [0, bad, 1])
    with pytest.raises(ValueError, match="a query of 95"):
        glimpse.dot_rows(matrix, query[:95], rows)
    for wrong in (matrix[:, :48], matrix.astype(np.float64), matrix[0]):
        with pytest.raises(ValueError, match="C-contiguous float32"):
            glimpse.dot_rows(wrong, query, [0])


def test_bad_inputs_raise_glimpse_errors(demo_clip, demo_caption, tmp_path):
    fixtures = fixture("clip-tiny").parent / "images"
    with pytest.raises(FileNotFoundError, match="missing.png"):
        demo_clip.embed_images([tmp_path / "missing.png"])
    with pytest.raises(glimpse.GlimpseError, match="not_an_image.png") as error:
        demo_clip.embed_images([fixtures / "not_an_image.png"])
    assert error.value.status in ("BAD_FORMAT", "UNSUPPORTED")
    with pytest.raises(glimpse.GlimpseError, match="bytes in memory"):
        demo_clip.embed_images([b"not a picture"])
    with pytest.raises(ValueError):
        demo_clip.embed_images([np.zeros((4, 4, 3), np.float32)])
    with pytest.raises(glimpse.GlimpseError) as error:
        demo_clip.caption([fixtures / "astronaut.png"])
    assert error.value.status == "WRONG_MODEL" and str(error.value)
    with pytest.raises(glimpse.NotFoundError, match="no-such-model"):
        glimpse.Model("/no-such-model")


def test_tasks_need_a_task_model_and_one_input(demo_caption, pictures):
    for call in (lambda: demo_caption.task(pictures[:1], "<OD>"), lambda: demo_caption.ocr(pictures[:1]),
                 lambda: demo_caption.describe(pictures[:1], region=(0, 0, 10, 10))):
        with pytest.raises(glimpse.GlimpseError, match="task model") as error:
            call()
        assert error.value.status == "WRONG_MODEL"
    for call, message in ((lambda: demo_caption.task(pictures[:1], "<OD>", text="x", region=(0, 0, 1, 1)), "not both"),
                          (lambda: demo_caption.segment(pictures[:1]), "one of them"),
                          (lambda: demo_caption.detect(pictures[:1], open_vocabulary=True), "needs a phrase"),
                          (lambda: demo_caption.describe(pictures[:1], (0, 0, 1, 1), category=True, read=True),
                           "not both"),
                          (lambda: demo_caption.describe(pictures[:1], (0, 0, 1)), "x0, y0, x1, y1")):
        with pytest.raises(ValueError, match=message):
            call()


def same_float32(a, b):
    """Two parsed results equal: strings exactly, numbers as float32 values (the processor's coordinates)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_float32(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same_float32(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return np.float32(a) == np.float32(b)
    return a == b


def test_florence2_tasks_match_the_reference():
    folder = fixture("florence2-tiny")
    expected = json.loads((folder / "expected.json").read_text())
    model = glimpse.Model(folder)
    images = [folder.parent / "images" / image["file"] for image in expected["images"]]
    checked = 0
    for case in expected["cases"]:
        prompt = expected["prompts"][case["prompt_index"]]
        if case["task"] not in ("<OD>", "<CAPTION_TO_PHRASE_GROUNDING>", "<OCR_WITH_REGION>"):
            continue
        result, = model.task(images[case["image"]], case["task"], text=prompt["text_input"],
                             max_tokens=case["params"]["max_new_tokens"], beams=case["params"]["num_beams"])
        assert result.ids == case["ids"] and result.text == case["text"] and result.task == case["task"]
        assert same_float32(result.result, case["parsed"])
        assert all(region.shape == ("quad" if case["task"] == "<OCR_WITH_REGION>" else "box") for region in
                   result.regions)
        checked += 1
    assert checked == 24
    detected = model.detect(images[1], max_tokens=20, beams=1)[0]
    assert detected.task == "<OD>" and detected.answer is None
    described = model.describe(images[1], region=(10, 10, 200, 200), max_tokens=20, beams=1)[0]
    assert described.task == "<REGION_TO_DESCRIPTION>" and isinstance(described.answer, str)
    streamed = []
    caption = model.caption(images[:2], max_tokens=20, beams=1, on_token=lambda i, t, text: streamed.append((i, text)))
    assert [c.ids for c in caption] == [case["ids"] for case in expected["cases"]
                                        if case["task"] == "<CAPTION>" and case["params"]["num_beams"] == 1][:2]
    # words as they come: each picture's last text is its caption (one token a call, the start token's two aside)
    assert [text for i, text in streamed if i == 1][-1] == caption[1].text
    assert len(streamed) == sum(len(c.ids) - 1 for c in caption)


def test_llava_answers_match_the_reference():
    folder = fixture("llava-qwen2-tiny")
    expected = json.loads((folder / "expected.json").read_text())
    model = glimpse.Model(folder)
    images = folder.parent / "images"
    for case in expected["cases"]:
        for search in ("greedy", "beam3"):
            generation = case[search]
            settings = dict(max_tokens=generation["params"]["max_new_tokens"], beams=generation["params"]["num_beams"])
            pictures = [images / name for name in case["images"]]
            if len(pictures) == 1:
                answer, = model.caption(pictures, prompt=case["prompt"], **settings)
            else:
                answer = model.ask_together(pictures, prompt=case["prompt"], **settings)
            # the library's text is a C string: a NUL the ids decode to ends it (the ids stay whole)
            assert answer.ids == generation["new_ids"] and answer.text == generation["text"].split("\x00")[0]
    with pytest.raises(ValueError, match="one of them"):
        model.ask_together([], question="a", prompt="b")


def test_chat_continues_a_conversation_from_its_cache():
    folder = fixture("llava-llama-tiny")
    case = json.loads((folder / "expected.json").read_text())["cases"][1]
    picture = folder.parent / "images" / "astronaut.png"
    model = glimpse.Model(folder)
    streamed = []
    messages = [{"role": "user", "content": [picture, "What color is the cup?"]}]
    first = model.chat(messages, max_tokens=20, on_token=lambda i, token, text: streamed.append(text))
    # the chat template's rendering of one question is the reference's prompt, and its answer the reference's
    assert first.prompt == case["prompt"] and first.prompt_ids == case["input_ids"]
    assert first.ids == case["greedy"]["new_ids"] and first.text == case["greedy"]["text"]
    assert streamed[-1] == first.text and first.cached_positions == 0 and not first.ended
    messages += [{"role": "assistant", "content": first.text},
                 {"role": "user", "content": [{"type": "text", "text": "Describe the image in one sentence."}]}]
    second = model.chat(messages, max_tokens=12)
    assert second.cached_positions >= case["merged_length"] - 1
    fresh = glimpse.Model(folder).chat(messages, max_tokens=12)
    assert (fresh.ids, fresh.text, fresh.cached_positions) == (second.ids, second.text, 0)
    with pytest.raises(glimpse.GlimpseError, match="last message"):
        model.chat(messages[:2])
    with pytest.raises(ValueError, match="text or image"):
        model.chat([{"role": "user", "content": [{"type": "audio"}]}])


def test_settings_of_the_wrong_type_or_range_are_refused(demo_clip, demo_caption, pictures, tmp_path):
    for bad in ({"beams": -1}, {"beams": 0}, {"beams": "2"}, {"max_tokens": 0}, {"min_tokens": -2},
                {"beams": 2.5}, {"top_k": -1}, {"seed": -3}):
        with pytest.raises((TypeError, ValueError), match=next(iter(bad))):
            demo_caption.caption(pictures[:1], **bad)
    with pytest.raises(TypeError, match="threads"):
        glimpse.Model(DEMO_CLIP, threads="2")
    with pytest.raises(ValueError, match="threads"):
        glimpse.Model(DEMO_CLIP, threads=-1)
    with pytest.raises(TypeError, match="str"):
        demo_clip.embed_texts([5])
    with pytest.raises(TypeError, match="str"):
        demo_clip.embed_texts(["a red circle", None])
    with glimpse.Index(str(tmp_path / "empty.db"), model=demo_clip) as index:
        assert index.search("a red circle", k=0) == []
        with pytest.raises(ValueError, match="k is at least 0"):
            index.search("a red circle", k=-1)
        with pytest.raises(TypeError, match="k is a whole number"):
            index.search("a red circle", k="3")


def test_named_pipes_are_refused_at_once(pictures, tmp_path):
    """A named pipe that nothing writes to must be refused, not read: reading it would block forever (an alarm
    turns such a hang into a failure here)."""
    import signal
    import glimpse.dask
    pipe = tmp_path / "pipe.mp4"
    os.mkfifo(pipe)

    def hang(signum, frame):
        raise RuntimeError("blocked reading a FIFO instead of refusing it")  # (not an OSError: no raises() takes it)
    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(20)
    try:
        for call in (lambda: glimpse.is_video(pipe), lambda: glimpse.Video(pipe), lambda: glimpse.Image(pipe),
                     lambda: glimpse.open_regular(pipe)):
            with pytest.raises(OSError, match="named pipe"):
                call()
        with pytest.raises(OSError, match="folder"):
            glimpse.open_regular(tmp_path)
        with glimpse.Model(DEMO_CLIP, threads=1) as model:
            vectors, described, broken = glimpse.dask.embed_pictures(model, [pictures[0], str(pipe)],
                                                                     video={"every": 2})
        assert [record["path"] for record in described] == [pictures[0]] and len(vectors) == 1
        assert [b["path"] for b in broken] == [str(pipe)] and "named pipe" in broken[0]["reason"]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ----------------------------------------------------------------- index

def test_index_update_and_search_equal_the_cli(demo_clip, pictures, tmp_path):
    database = tmp_path / "photos.db"
    folder = tmp_path / "pictures"
    folder.mkdir()
    for p in pictures:
        (folder / os.path.basename(p)).write_bytes(open(p, "rb").read())
    (folder / "broken.png").write_bytes(b"\x89PNG broken")
    progress = []
    with glimpse.Index(database, demo_clip) as index:
        summary = index.update([folder], progress=lambda done, total: progress.append((done, total)))
        assert summary.added == len(pictures) and summary.failed == 1
        assert [os.path.basename(path) for path, _ in summary.failures] == ["broken.png"]
        assert progress and progress[-1][0] == progress[-1][1] and progress[-1][1] >= len(pictures)
        assert len(index) == len(pictures)
        again = index.update([folder])
        assert again.unchanged == len(pictures) and again.added == 0
        by_vector = index.search(demo_clip.embed_texts("a yellow triangle")[0], k=3)
    expected = glimpse_cli("search", "--db", database, "-k", "3", "--json", "a yellow triangle")[0]["results"]
    with glimpse.Index(database) as read_only:  # no model: the index's own is loaded for a text query
        found = read_only.search("a yellow triangle", k=3)
    assert [path for path, _ in found] == [r["image"] for r in expected] == [path for path, _ in by_vector]
    np.testing.assert_allclose([s for _, s in found], [r["score"] for r in expected], rtol=0, atol=1e-4)
    with pytest.raises(ValueError):
        glimpse.Index(database).search(np.zeros(3, np.float32))
    # the words filters: an index built without --ocr/--objects says how to build one; no query nor words is wrong
    with glimpse.Index(database) as read_only:
        with pytest.raises(glimpse.GlimpseError, match="--ocr"):
            read_only.search(text_in="invoice")
        with pytest.raises(glimpse.GlimpseError, match="--ocr"):
            read_only.search("a yellow triangle", object="dog")
        with pytest.raises(ValueError, match="text_in or object"):
            read_only.search()
        with pytest.raises(TypeError, match="text_in"):
            read_only.search(text_in=5)


def test_index_kept_open_sees_each_reindex(demo_clip, pictures, tmp_path):
    """A glimpse.Index kept open while `glimpse index` (another process) adds a picture and then removes one
    answers from each committed state, never calling the healthy index damaged (issue 35, item 3)."""
    database = tmp_path / "live.db"
    folder = tmp_path / "live"
    folder.mkdir()
    for p in pictures[:4]:
        shutil.copy(p, folder / os.path.basename(p))
    glimpse_cli("index", "-m", DEMO_CLIP, "--db", database, "--json", folder)
    with glimpse.Index(database) as reader:
        assert len(reader.search("a red circle", k=10)) == 4
        assert len(reader.duplicates(0.0)) == 1  # every picture in one group at a threshold of 0
        shutil.copy(pictures[4], folder / "added.png")
        glimpse_cli("index", "-m", DEMO_CLIP, "--db", database, "--json", folder)
        assert sum(len(group) for group in reader.duplicates(0.0)) == 5  # before any search refreshes it
        found = reader.search("a red circle", k=10)
        assert len(found) == 5 and any(path.endswith("/added.png") for path, _ in found)
        os.remove(folder / os.path.basename(pictures[0]))
        glimpse_cli("index", "-m", DEMO_CLIP, "--db", database, "--json", folder)
        found = reader.search("a red circle", k=10)
        assert len(found) == 4 and not any(path.endswith(os.path.basename(pictures[0])) for path, _ in found)
        assert sum(len(group) for group in reader.duplicates(0.0)) == 4


def test_index_management_equals_the_cli(demo_clip, pictures, tmp_path):
    database = tmp_path / "photos.db"
    folder = tmp_path / "pictures"
    folder.mkdir()
    for p in pictures:
        (folder / os.path.basename(p)).write_bytes(open(p, "rb").read())
    (folder / "copy.png").write_bytes(open(pictures[0], "rb").read())  # a duplicate of the first
    with glimpse.Index(database, demo_clip) as index:
        index.update([folder])
        stats = index.stats()
        assert stats["images"] == len(pictures) + 1 and stats["dim"] == demo_clip.embedding_dim
        assert stats["precision"] == "float32" and stats["file_bytes"] > 0
        stored = index.embedding(folder / "copy.png")
        # (an embedding may differ in its last bit with the batch it was made in)
        np.testing.assert_allclose(stored, demo_clip.embed_images([folder / "copy.png"])[0], rtol=0, atol=1e-6)
        groups = index.duplicates()
        expected = glimpse_cli("duplicates", "--db", database, "--json")
        assert sorted(sorted(path for path, _ in g) for g in groups) == \
            sorted(sorted(e["image"] for e in g["group"]) for g in expected)
        assert any(str(folder / "copy.png") in [path for path, _ in g] for g in groups)
        with pytest.raises(glimpse.NotFoundError):
            index.embedding(folder / "missing.png")
        assert index.remove(folder / "copy.png") == 1
        os.remove(folder / os.path.basename(pictures[1]))
        assert index.prune() == 1
        assert len(index) == len(pictures) - 1


# --------------------------------------------------------- videos

@pytest.fixture(scope="module")
def video(tmp_path_factory, pictures):
    """trip.mp4: three demo pictures shown 2 s each at 10 frames a second (made by the ffmpeg tool)."""
    import shutil
    import subprocess
    if not shutil.which("ffmpeg"):
        pytest.skip("no ffmpeg tool to make a video")
    path = tmp_path_factory.mktemp("video") / "trip.mp4"
    inputs = [a for picture in pictures[:3] for a in ("-loop", "1", "-t", "2", "-r", "10", "-i", str(picture))]
    filters = "".join(f"[{i}:v]scale=96:64,setsar=1[v{i}];" for i in range(3)) + \
        "".join(f"[v{i}]" for i in range(3)) + "concat=n=3:v=1:a=0,format=yuv420p[out]"
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *inputs, "-filter_complex",
                    filters, "-map", "[out]", "-c:v", "libx264", "-r", "10", str(path)], check=True)
    return path


def test_video_frames_are_the_cli_s(demo_clip, video):
    for sampling, options in (({}, []), ({"every": 0.5}, ["--every", "0.5"]), ({"scenes": 0.1}, ["--scenes"])):
        expected = glimpse_cli("embed", "-m", DEMO_CLIP, "--json", *options, "-i", video)
        with glimpse.Video(video, **sampling) as frames:
            got = list(frames)
        assert [seconds for seconds, _ in got] == [row["time"] for row in expected], sampling
        embeddings = demo_clip.embed_images([image for _, image in got])
        np.testing.assert_array_equal(embeddings, np.array([row["embedding"] for row in expected], np.float32))
        assert all((image.width, image.height) == (96, 64) for _, image in got)
    # from bytes: the same frames, pixel for pixel
    with glimpse.Video(video) as from_file, glimpse.Video(video.read_bytes()) as from_bytes:
        for (t1, a), (t2, b) in zip(from_file, from_bytes, strict=True):
            assert t1 == t2
            np.testing.assert_array_equal(a.pixels(), b.pixels())
    assert glimpse.is_video(video) and glimpse.is_video(video.read_bytes())
    assert glimpse.video_sampling() == "every 2 s" and glimpse.video_sampling(scenes=0.2) == "at scene changes of 0.2"


def test_video_errors(video, pictures, tmp_path):
    assert not glimpse.is_video(pictures[0])
    with pytest.raises(glimpse.GlimpseError, match="not a video") as error:
        glimpse.Video(b"this is not a video")
    assert error.value.status == "BAD_FORMAT"
    with pytest.raises(glimpse.GlimpseError):
        glimpse.Video(pictures[0])
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(video.read_bytes()[:1200])
    with pytest.raises(glimpse.GlimpseError):
        list(glimpse.Video(cut))
    # its index first, its frames cut at 70%: not whole, its frames before the cut still given
    fast = tmp_path / "fast.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-i", str(video), "-c", "copy",
                    "-movflags", "+faststart", str(fast)], check=True)
    with glimpse.Video(fast) as whole:
        assert whole.whole and len(list(whole)) == 3
    cut.write_bytes(fast.read_bytes()[:fast.stat().st_size * 7 // 10])
    with glimpse.Video(cut) as damaged:
        assert not damaged.whole and 1 <= len(list(damaged)) < 3
    (tmp_path / "empty.mp4").write_bytes(b"")
    with pytest.raises(glimpse.GlimpseError, match="empty"):
        glimpse.Video(tmp_path / "empty.mp4")
    with pytest.raises(FileNotFoundError):
        glimpse.Video(tmp_path / "missing.mp4")
    for bad in ({"every": 0}, {"scenes": -1}):
        with pytest.raises(ValueError):
            glimpse.Video(video, **bad)
    with pytest.raises(TypeError):
        glimpse.Video(3)


def test_index_update_takes_videos_as_the_cli_does(demo_clip, video, tmp_path):
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    with glimpse.Index(mine, demo_clip) as index:
        summary = index.update([video.parent], videos=True)
        assert (summary.added, summary.failed) == (1, 0)
        stats = index.stats()
        assert (stats["videos"], stats["frames"], stats["video_sampling"]) == (1, 3, "every 2 s")
        with pytest.raises(glimpse.GlimpseError, match="every 2 s"):
            index.update([video.parent], videos=True, every=1)
    glimpse_cli("index", "-m", DEMO_CLIP, "--db", theirs, "--json", video.parent)
    query = "a red circle"
    expected = glimpse_cli("search", "--db", theirs, "--json", "-k", "3", query)[0]["results"]
    with glimpse.Index(mine) as index:
        found = index.search(query, k=3, with_times=True)
    assert [(path, seconds) for path, _, seconds in found] == [(r["image"], r.get("time")) for r in expected]
    assert any(seconds is not None for _, _, seconds in found)


def test_image_pixels_are_the_decoded_picture(pictures):
    with glimpse.Image(pictures[0]) as image:
        np.testing.assert_array_equal(image.pixels(), np.asarray(PILImage.open(pictures[0]).convert("RGB")))


# --------------------------------------------------------------- threads

def test_two_threads_share_one_model(pictures):
    model = glimpse.Model(DEMO_CLIP, threads=1)
    images = [glimpse.Image(p) for p in pictures] * 8
    alone = model.embed_images(images)
    results = [None, None]

    def work(slot):
        results[slot] = model.embed_images(images)
    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_array_equal(results[0], alone)
    np.testing.assert_array_equal(results[1], alone)


def largest_gap_during(call):
    """Runs call() while another Python thread records the times it gets to run (every millisecond);
    returns the call's duration and the longest stretch of it during which that thread did not run."""
    ticks, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)
    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.02)
    start = time.perf_counter()
    call()
    end = time.perf_counter()
    stop.set()
    thread.join()
    inside = [start] + [t for t in ticks if start < t < end] + [end]
    return end - start, max(b - a for a, b in zip(inside, inside[1:]))


def test_calls_release_the_gil(pictures):
    model = glimpse.Model(DEMO_CLIP, threads=1)
    images = [glimpse.Image(p) for p in pictures] * 192
    duration, gap = largest_gap_during(lambda: model.embed_images(images, batch_size=len(images)))
    # another Python thread ran throughout the call: its longest pause is a small part of the call
    assert duration > 0.1 and gap < 0.5 * duration, (duration, gap)

    # the control: the same call through ctypes.PyDLL, which keeps the GIL, stops the other thread
    # for the whole call, so the measure above can tell the difference
    holding = ctypes.PyDLL(glimpse._library.lib._name).glimpse_embed_images
    holding.argtypes = glimpse._library.lib.glimpse_embed_images.argtypes
    handles = (ctypes.c_void_p * len(images))(*[image._handle for image in images])
    out = np.empty((len(images), model.embedding_dim), np.float32)
    duration, gap = largest_gap_during(
        lambda: holding(model._context(), handles, len(images), out.ctypes.data_as(glimpse._library.c_float_p)))
    assert gap > 0.8 * duration, (duration, gap)


# ------------------------------------------------------- explanations, as the CLI

def cli_explanations(model, pictures, tmp_path, *arguments):
    return glimpse_cli("explain", "-m", model, "--json", "--out", tmp_path, *arguments, *pictures)


def assert_explanation_equals_the_cli(got, expected):
    # the CLI prints 9 significant digits, which give back every float32 exactly
    assert list(got.grid_size) == expected["grid_size"]
    assert [(w.label, w.tokens) for w in got.words] == [(w["word"], w["tokens"]) for w in expected["words"]]
    for word, printed in zip(got.words, expected["words"]):
        assert word.grid.dtype == np.float32 and word.grid.shape == got.grid_size
        np.testing.assert_array_equal(word.grid, np.array(printed["grid"], dtype=np.float32))
    others = [m for m in got.maps if not any(m is w for w in got.words)]
    assert [m.kind if m.kind != "cross_attention" else "text" for m in others] == [m["kind"] for m in expected["maps"]]
    for mine, printed in zip(others, expected["maps"]):
        np.testing.assert_array_equal(mine.grid, np.array(printed["grid"], dtype=np.float32))
    assert got.words or others


def test_clip_explanations_equal_the_cli(demo_clip, pictures, tmp_path):
    text = "a red square"
    expected = cli_explanations(DEMO_CLIP, pictures[:2], tmp_path, "-t", text)
    assert len(expected) == 2
    for picture, row in zip(pictures, expected):
        got = demo_clip.explain(picture, text)
        assert got.text == text and np.float32(got.score) == np.float32(row["score"])
        assert [m.kind for m in got.maps] == ["rollout", "occlusion"] and got.labels == ["rollout", "occlusion"]
        assert_explanation_equals_the_cli(got, row)
        assert abs(float(got.maps[0].grid.sum()) - 1) < 1e-4  # rollout's row sums to 1
        assert got.image_size == PILImage.open(picture).size and len(got.region) == 4
        sheet = got.png(picture, panel=64)
        assert sheet.startswith(b"\x89PNG\r\n\x1a\n")
        assert PILImage.open(io.BytesIO(sheet)).size[0] > 64 * 2  # the picture and two panels
        got.close()
    # one layer and head, no occlusion, no text; and the raw probabilities
    row = cli_explanations(DEMO_CLIP, pictures[:1], tmp_path, "--layer", "0", "--head", "1", "--no-occlusion")[0]
    got = demo_clip.explain(pictures[0], layer=0, head=1, occlusion=False, raw=True)
    assert got.text is None and got.score is None
    assert_explanation_equals_the_cli(got, row)
    layers, heads, tokens = got.raw["vision_attentions"].shape[:3]
    assert got.raw["vision_attentions"].shape == (layers, heads, tokens, tokens)
    np.testing.assert_allclose(got.raw["vision_attentions"].sum(-1), 1, atol=1e-4)


def test_caption_explanations_equal_the_cli(demo_caption, pictures, tmp_path):
    expected = cli_explanations(DEMO_CAPTION, pictures[:2], tmp_path)
    assert len(expected) == 2
    for picture, row in zip(pictures, expected):
        got = demo_caption.explain(np.asarray(PILImage.open(picture).convert("RGB")))  # a numpy source
        assert (got.text, got.ids) == (row["caption"], row["ids"]) and got.score is None
        assert_explanation_equals_the_cli(got, row)
        for word in got.words:
            assert abs(float(word.grid.sum()) - 1) < 1e-4
    with pytest.raises(ValueError):
        demo_caption.explain(pictures[0], "a text")
    with pytest.raises(glimpse.GlimpseError, match="layer"):  # past the model's last: glimpse's message
        demo_caption.explain(pictures[0], layer=63)


def test_byte_bpe_captioner_explanations_equal_the_cli(tmp_path):
    # ViT-GPT2's caption and BLIP-2's answer to a question (the fixtures), with BLIP-2's weights on the queries
    picture = fixture("vit-gpt2-tiny").parent / "images" / "astronaut.png"
    question = "what is in the picture?"
    for name, arguments in (("vit-gpt2-tiny", ()), ("blip2-opt-tiny", ("-q", question))):
        row = cli_explanations(fixture(name), [picture], tmp_path, *arguments)[0]
        with glimpse.Model(fixture(name)) as model:
            got = model.explain(picture, question=question if arguments else None, raw=True)
            # the CLI prints the text without the whitespace at its ends (the model card's strip)
            assert got.ids == row["ids"] and got.text.strip() == row["answer" if arguments else "caption"]
            assert_explanation_equals_the_cli(got, row)
            for word, printed in zip(got.words, row["words"]):
                if arguments:
                    np.testing.assert_array_equal(word.queries, np.array(printed["queries"], dtype=np.float32))
                else:
                    assert word.queries is None and "queries" not in printed
            assert ("qformer_cross_attentions" in got.raw) == bool(arguments)
            got.close()
            if not arguments:  # a question is BLIP-2's alone
                with pytest.raises(ValueError, match="BLIP-2"):
                    model.explain(picture, question=question)


# The binding's structures, field by field, against the C header's: a field appended to a public struct in
# glimpse.h must be appended here too, or the library writes past the binding's buffer.
STRUCTS = {"LoadParams": "glimpse_load_params", "ModelInfo": "glimpse_model_info",
           "ContextParams": "glimpse_context_params", "ImageParams": "glimpse_image_params",
           "CaptionParams": "glimpse_caption_params", "Caption": "glimpse_caption",
           "IndexSummary": "glimpse_index_summary", "IndexParams": "glimpse_index_params",
           "IndexStats": "glimpse_index_stats",
           "SearchResult": "glimpse_search_result", "SearchFilter": "glimpse_search_filter",
           "ExplainMap": "glimpse_explain_map",
           "ExplainTensor": "glimpse_explain_tensor", "Explanation": "glimpse_explanation",
           "ExplainParams": "glimpse_explain_params", "VideoOptions": "glimpse_video_options",
           "Region": "glimpse_region", "TaskResult": "glimpse_task_result",
           "ChatPart": "glimpse_chat_part", "ChatMessage": "glimpse_chat_message",
           "FaissSearchParams": "glimpse_faiss_search_params"}


def test_structures_match_the_header(tmp_path):
    import shutil
    import subprocess
    from glimpse import _library
    # every structure of the binding is checked, so a new one cannot be forgotten here (a field the header gains and
    # the binding lacks makes the library write past the binding's buffer, and Python crash later)
    mirrored = {name for name, value in vars(_library).items()
                if isinstance(value, type) and issubclass(value, ctypes.Structure) and value is not ctypes.Structure}
    assert mirrored == set(STRUCTS), f"structures not compared with the header: {sorted(mirrored - set(STRUCTS))}"
    compiler = shutil.which("cc")
    if not compiler:
        pytest.skip("no C compiler to read the header's layout")
    include = os.path.join(os.path.dirname(__file__), "..", "..", "include")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include \"glimpse.h\"", "#include \"glimpse_faiss.h\"",
             "int main(void) {"]
    for python_name, c_name in STRUCTS.items():
        for field, _ in getattr(_library, python_name)._fields_:
            lines.append(f'    printf("{python_name} {field} %zu\\n", offsetof({c_name}, {field}));')
        lines.append(f'    printf("{python_name} sizeof %zu\\n", sizeof({c_name}));')
    lines.append("    return 0;\n}")
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines))
    subprocess.run([compiler, "-I", include, str(source), "-o", str(tmp_path / "layout")], check=True)
    printed = subprocess.run([str(tmp_path / "layout")], check=True, capture_output=True, text=True).stdout
    for line in printed.splitlines():
        python_name, field, value = line.split()
        structure = getattr(_library, python_name)
        got = ctypes.sizeof(structure) if field == "sizeof" else getattr(structure, field).offset
        assert got == int(value), f"{python_name}.{field}: binding {got}, header {value}"
