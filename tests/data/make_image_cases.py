#!/usr/bin/env python3
"""make_image_cases.py OUT — writes the image decoding cases test_image_formats checks.

Each case is an input picture made here (no outside image is copied) and the RGB that the
reference gives for it, written as a binary PPM: Pillow 9.4's
ImageOps.exif_transpose(Image.open(f)).convert("RGB") as transformers' load_image does it
(or Image.open(f).convert("RGB") for cases read with the orientation ignored), and for
HEIC/AVIF the PNG that libheif's heif-convert writes, read by Pillow. Refusal cases name
the status instead. OUT/cases.tsv lists them: name, input, expected (a .ppm or
"refuse:STATUS"), mode ("orient", "keep" or "limit=N").

Needs python3-pil; HEIF cases also heif-enc and heif-convert (libheif-examples) and TIFF
variants tiffcp (libtiff-tools). Exits 77 when Pillow is missing, and leaves out (with a
note) the cases whose tools are missing.
"""
import io
import os
import warnings
import random
import shutil
import struct
import subprocess
import sys
import zlib

try:
    from PIL import Image, ImageOps
except ImportError:
    print("make_image_cases: Pillow (python3-pil) is not installed", file=sys.stderr)
    sys.exit(77)

warnings.simplefilter("ignore")  # Pillow's warnings about odd metadata are expected here
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
CASES = []
rng = random.Random(18)


def noise(width, height, channels, maximum=255):
    return [[[rng.randint(0, maximum) for _ in range(channels)] for _ in range(width)] for _ in range(height)]


def smooth_rgb(width, height):
    """A picture with gradients and edges (lossy codecs keep it recognisable)."""
    image = Image.new("RGB", (width, height))
    image.putdata([((x * 255) // max(1, width - 1), (y * 255) // max(1, height - 1), ((x // 5 + y // 3) % 2) * 200 + 20)
                   for y in range(height) for x in range(width)])
    return image


def asymmetric(width, height):
    """Every orientation of it differs: a gradient plus a marked corner."""
    image = smooth_rgb(width, height)
    for y in range(3):
        for x in range(5):
            image.putpixel((x, y), (255, 0, 0))
    return image


def write_ppm(path, image):
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % image.size)
        f.write(image.tobytes())


def add(name, data, suffix, mode="orient", expected=None):
    """Saves the input and Pillow's answer for it (or `expected`: an Image or a refusal)."""
    path = os.path.join(OUT, name + suffix)
    with open(path, "wb") as f:
        f.write(data)
    if expected is None:
        with Image.open(path) as image:
            if mode == "orient":
                image = ImageOps.exif_transpose(image)
            expected = image.convert("RGB")
    if isinstance(expected, str):
        column = expected
    else:
        column = name + ".ppm"
        write_ppm(os.path.join(OUT, column), expected)
    CASES.append((name, name + suffix, column, mode))


def saved(image, format, **options):
    buffer = io.BytesIO()
    image.save(buffer, format, **options)
    return buffer.getvalue()


def have(tool):
    if shutil.which(tool):
        return True
    print(f"make_image_cases: {tool} not found, its cases are left out", file=sys.stderr)
    return False


# ------------------------------------------------------------------ EXIF blocks

def exif_block(entries, big_endian=False, prefix=b"Exif\0\0", truncate=None):
    """A TIFF-structured EXIF block: entries are (tag, type, count, payload bytes)."""
    e = ">" if big_endian else "<"
    head = (b"MM\0*" if big_endian else b"II*\0") + struct.pack(e + "I", 8)
    ifd = struct.pack(e + "H", len(entries))
    data_at = 8 + 2 + 12 * len(entries) + 4
    extra = b""
    for tag, type_, count, payload in entries:
        if isinstance(payload, int):  # an out-of-line offset given as is
            field = struct.pack(e + "I", payload)
        elif len(payload) <= 4:
            field = payload.ljust(4, b"\0")
        else:
            field = struct.pack(e + "I", data_at + len(extra))
            extra += payload
        ifd += struct.pack(e + "HHI", tag, type_, count) + field
    block = head + ifd + struct.pack(e + "I", 0) + extra
    if truncate:
        block = block[:truncate]
    return prefix + block


def orientation_entry(value, big_endian=False, type_=3, count=1):
    e = ">" if big_endian else "<"
    payload = {1: bytes([value]), 3: struct.pack(e + "H", value) * count, 4: struct.pack(e + "I", value) * count,
               5: struct.pack(e + "II", value * 3, 3), 8: struct.pack(e + "h", value),
               9: struct.pack(e + "i", value), 11: struct.pack(e + "f", value), 12: struct.pack(e + "d", value),
               2: b"%d\0" % value}[type_]
    return (0x0112, type_, count if type_ in (3, 4) else len(payload) if type_ == 2 else 1, payload)


def insert_app1(jpeg, block):
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(block) + 2) + block + jpeg[2:]


# ------------------------------------------------------------------ PNG writer

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def pack_row(samples, depth):
    if depth == 8:
        return bytes(samples)
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    out, bits, used = bytearray(), 0, 0
    for s in samples:
        bits = (bits << depth) | s
        used += depth
        if used == 8:
            out.append(bits)
            bits = used = 0
    if used:
        out.append(bits << (8 - used))
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def make_png(pixels, colour, depth, interlace=False, before=b"", after=b""):
    """pixels: rows of per-pixel sample lists, in the PNG's own sample layout."""
    height, width = len(pixels), len(pixels[0])
    raw = b""
    if not interlace:
        for row in pixels:
            raw += b"\0" + pack_row([s for p in row for s in p], depth)
    else:
        for x0, y0, dx, dy in ADAM7:
            for y in range(y0, height, dy):
                picked = [pixels[y][x] for x in range(x0, width, dx)]
                if picked:
                    raw += b"\0" + pack_row([s for p in picked for s in p], depth)
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + before + png_chunk(b"IDAT", zlib.compress(raw))
            + after + png_chunk(b"IEND", b""))


def png_cases():
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
    depths = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
    width, height = 13, 7
    for colour, colour_depths in depths.items():
        for depth in colour_depths:
            for interlace in (False, True):
                for transparency in ((False, True) if colour in (0, 2, 3) else (False,)):
                    before = b""
                    if colour == 3:
                        # a palette shorter than the index range: indices past its end are Pillow's grey ramp
                        entries = max(1, (1 << depth) - 3) if depth < 8 else 200
                        before += png_chunk(b"PLTE", bytes(rng.randint(0, 255) for _ in range(3 * entries)))
                        pixels = noise(width, height, 1, (1 << depth) - 1)
                        if transparency:
                            before += png_chunk(b"tRNS", bytes(rng.randint(0, 255) for _ in range(min(entries, 5))))
                    else:
                        pixels = noise(width, height, channels[colour], (1 << depth) - 1)
                        if transparency:
                            values = [rng.randint(0, (1 << depth) - 1) for _ in range(1 if colour == 0 else 3)]
                            before += png_chunk(b"tRNS", b"".join(struct.pack(">H", v) for v in values))
                    name = f"png_c{colour}_d{depth}{'_i' if interlace else ''}{'_trns' if transparency else ''}"
                    add(name, make_png(pixels, colour, depth, interlace, before), ".png")
    # palette with a single fully transparent entry (Pillow keeps it as an index)
    palette = png_chunk(b"PLTE", bytes(range(0, 48)))
    add("png_palette_simple_trns", make_png(noise(9, 5, 1, 15), 3, 8, False, palette + png_chunk(b"tRNS", b"\xff\xff\0")), ".png")
    # 16-bit grey over 255 clips
    add("png_grey16_clip", make_png([[[v]] for v in (0, 1, 255, 256, 4000, 65535)], 0, 16), ".png")


def png_orientation_cases():
    image = asymmetric(11, 6)
    rgb = [[list(image.getpixel((x, y))) for x in range(11)] for y in range(6)]
    for value in range(1, 9):
        chunk = png_chunk(b"eXIf", exif_block([orientation_entry(value)], prefix=b""))
        add(f"png_exif_o{value}", make_png(rgb, 2, 8, False, chunk), ".png")
    add("png_exif_o6_keep", make_png(rgb, 2, 8, False, png_chunk(b"eXIf", exif_block([orientation_entry(6)], prefix=b""))),
        ".png", mode="keep")
    add("png_exif_after_idat_o5", make_png(rgb, 2, 8, False, b"",
                                            png_chunk(b"eXIf", exif_block([orientation_entry(5)], True, prefix=b""))), ".png")
    hexed = exif_block([orientation_entry(8)]).hex()
    profile = "\nexif\n%8d\n" % (len(hexed) // 2) + "\n".join(hexed[i:i + 72] for i in range(0, len(hexed), 72)) + "\n"
    add("png_raw_profile_ztxt_o8", make_png(rgb, 2, 8, False, png_chunk(
        b"zTXt", b"Raw profile type exif\0\0" + zlib.compress(profile.encode()))), ".png")
    add("png_raw_profile_text_o7", make_png(rgb, 2, 8, False, b"", png_chunk(
        b"tEXt", b"Raw profile type exif\0" + profile.replace(hexed[:72], exif_block([orientation_entry(7)]).hex()[:72]).encode())), ".png")
    xmp = '<x:xmpmeta><rdf:Description tiff:Orientation="3"/></x:xmpmeta>'
    add("png_xmp_attribute_o3", make_png(rgb, 2, 8, False, png_chunk(
        b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + xmp.encode())), ".png")
    xmp = "<x:xmpmeta><tiff:Orientation>6</tiff:Orientation></x:xmpmeta>"
    add("png_xmp_element_o6_compressed", make_png(rgb, 2, 8, False, b"", png_chunk(
        b"iTXt", b"XML:com.adobe.xmp\0\1\0\0\0" + zlib.compress(xmp.encode()))), ".png")
    # EXIF without an orientation lets XMP decide; EXIF with one wins over XMP
    other = exif_block([(0x010F, 2, 5, b"make\0")], prefix=b"")
    add("png_exif_without_orientation_xmp_o2", make_png(rgb, 2, 8, False, png_chunk(b"eXIf", other) + png_chunk(
        b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + b'tiff:Orientation="2"')), ".png")
    add("png_exif_o4_over_xmp_o6", make_png(rgb, 2, 8, False, png_chunk(b"eXIf", exif_block(
        [orientation_entry(4)], prefix=b"")) + png_chunk(b"tEXt", b'XML:com.adobe.xmp\0tiff:Orientation="6"')), ".png")


# ------------------------------------------------------------------ JPEG

def jpeg_cases():
    image = asymmetric(40, 24)
    add("jpeg_q90_420", saved(image, "JPEG", quality=90), ".jpg")
    add("jpeg_q75_444", saved(image, "JPEG", quality=75, subsampling=0), ".jpg")
    add("jpeg_progressive", saved(image, "JPEG", quality=85, progressive=True), ".jpg")
    add("jpeg_grey", saved(image.convert("L"), "JPEG", quality=90), ".jpg")
    cmyk = saved(image.convert("CMYK"), "JPEG", quality=90)
    add("jpeg_cmyk_adobe", cmyk, ".jpg")
    # the same without its Adobe APP14 marker: Pillow still reads it inverted
    at = cmyk.find(b"\xff\xee")
    if at > 0:
        length = struct.unpack(">H", cmyk[at + 2:at + 4])[0]
        add("jpeg_cmyk_no_adobe", cmyk[:at] + cmyk[at + 2 + length:], ".jpg")
    plain = saved(image, "JPEG", quality=90)
    for value in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = value
        add(f"jpeg_exif_o{value}", saved(image, "JPEG", quality=90, exif=exif.tobytes()), ".jpg")
    add("jpeg_exif_o6_keep", saved(image, "JPEG", quality=90, exif=exif_block([orientation_entry(6)])), ".jpg", mode="keep")
    # the EXIF reader against Pillow's rules, both byte orders, every type
    for big in (False, True):
        order = "mm" if big else "ii"
        for type_ in (3, 4, 5, 8, 9, 11, 12, 1, 2):
            add(f"jpeg_exif_{order}_type{type_}_o6", insert_app1(plain, exif_block([orientation_entry(6, big, type_)], big)), ".jpg")
        add(f"jpeg_exif_{order}_count2", insert_app1(plain, exif_block([orientation_entry(8, big, 3, 2)], big)), ".jpg")
    make = (0x010F, 2, 12, b"camera make\0")
    add("jpeg_exif_duplicate_last_wins", insert_app1(plain, exif_block([orientation_entry(3), make, orientation_entry(6)])), ".jpg")
    add("jpeg_exif_zero_count", insert_app1(plain, exif_block([orientation_entry(6), (0x0112, 3, 0, b"")])), ".jpg")
    add("jpeg_exif_value_9", insert_app1(plain, exif_block([orientation_entry(9)])), ".jpg")
    add("jpeg_exif_unknown_type", insert_app1(plain, exif_block([(0x0112, 14, 1, b"\6\0\0\0")])), ".jpg")
    # an out-of-line value past the end stops the reading there: the orientation after it is lost
    lost = exif_block([(0x010F, 2, 400, 9999), orientation_entry(6)])
    add("jpeg_exif_bad_offset_stops", insert_app1(plain, lost), ".jpg")
    add("jpeg_exif_truncated_ifd", insert_app1(plain, exif_block([orientation_entry(8), make, make], truncate=8 + 2 + 12 + 5)), ".jpg")
    add("jpeg_exif_ifd_offset_past_end", insert_app1(plain, b"Exif\0\0II*\0" + struct.pack("<I", 1 << 30)), ".jpg")
    add("jpeg_exif_not_tiff", insert_app1(plain, b"Exif\0\0XX*\0\x08\0\0\0" + bytes(20)), ".jpg")
    first = insert_app1(plain, exif_block([orientation_entry(6)]))
    add("jpeg_two_exif_first_wins", insert_app1(first, exif_block([make])), ".jpg")
    add("jpeg_exif_big_offset_ifd", insert_app1(plain, b"Exif\0\0MM\0*" + struct.pack(">I", 16) + bytes(4)
                                                + exif_block([orientation_entry(7, True)], True, prefix=b"")[8:]), ".jpg")


# ------------------------------------------------------------------ WebP

def webp_cases():
    image = asymmetric(33, 21)
    add("webp_lossy", saved(image, "WEBP", quality=80), ".webp")
    add("webp_lossless", saved(image, "WEBP", lossless=True), ".webp")
    rgba = image.convert("RGBA")
    rgba.putdata([(r, g, b, (x * 37 + y * 11) % 256) for (r, g, b, _), (x, y) in
                  zip(rgba.getdata(), ((x, y) for y in range(21) for x in range(33)))])
    add("webp_lossy_alpha", saved(rgba, "WEBP", quality=80), ".webp")
    add("webp_lossless_alpha", saved(rgba, "WEBP", lossless=True, exact=True), ".webp")
    second = image.transpose(Image.Transpose.ROTATE_180)
    add("webp_animated_first_frame", saved(image, "WEBP", save_all=True, append_images=[second], lossless=True, duration=100), ".webp")
    add("webp_animated_lossy_alpha", saved(rgba, "WEBP", save_all=True, append_images=[second.convert("RGBA")], quality=70), ".webp")
    for value in (3, 6, 8):
        add(f"webp_exif_o{value}", saved(image, "WEBP", quality=80, exif=exif_block([orientation_entry(value)])), ".webp")
    add("webp_exif_o6_keep", saved(image, "WEBP", quality=80, exif=exif_block([orientation_entry(6)])), ".webp", mode="keep")
    add("webp_exif_no_prefix_o5", saved(image, "WEBP", lossless=True, exif=exif_block([orientation_entry(5)], prefix=b"")), ".webp")


# ------------------------------------------------------------------ TIFF

def make_tiff(width, height, photometric, bits, samples, data, big_endian=False, extras=(), colormap=None,
              orientation=None, photometric_tag=True, rows_per_strip=None, sample_format=None):
    """An uncompressed, contiguous TIFF written field by field (data: the strip bytes, rows packed)."""
    e = ">" if big_endian else "<"
    entries = []

    def entry(tag, type_, values):
        fmt = {3: "H", 4: "I"}[type_]
        entries.append((tag, type_, len(values), b"".join(struct.pack(e + fmt, v) for v in values)))

    row_bytes = (width * bits * samples + 7) // 8
    rows_per_strip = rows_per_strip or height
    strips = [data[y * row_bytes:(y + rows_per_strip) * row_bytes] for y in range(0, height, rows_per_strip)]
    entry(256, 4, [width])
    entry(257, 4, [height])
    entry(258, 3, [bits] * samples)
    entry(259, 3, [1])
    if photometric_tag:
        entry(262, 3, [photometric])
    entry(273, 4, [0] * len(strips))  # filled below
    if orientation is not None:
        entry(274, 3, [orientation])
    entry(277, 3, [samples])
    entry(278, 4, [rows_per_strip])
    entry(279, 4, [len(s) for s in strips])
    if colormap:
        entry(320, 3, colormap)
    if extras:
        entry(338, 3, list(extras))
    if sample_format:
        entry(339, 3, [sample_format] * samples)
    entries.sort()
    header = (b"MM\0*" if big_endian else b"II*\0") + struct.pack(e + "I", 8)
    ifd_size = 2 + 12 * len(entries) + 4
    out_of_line, where = b"", 8 + ifd_size
    offsets = {}
    for tag, type_, count, payload in entries:
        if len(payload) > 4:
            offsets[tag] = where + len(out_of_line)
            out_of_line += payload + (b"\0" if len(payload) % 2 else b"")
    strip_at = 8 + ifd_size + len(out_of_line)
    strip_offsets, at = [], strip_at
    for s in strips:
        strip_offsets.append(at)
        at += len(s)
    # rewrite the strip offsets now that they are known
    fixed = []
    for tag, type_, count, payload in entries:
        if tag == 273:
            payload = b"".join(struct.pack(e + "I", v) for v in strip_offsets)
        fixed.append((tag, type_, count, payload))
    ifd, out_of_line = struct.pack(e + "H", len(fixed)), b""
    for tag, type_, count, payload in fixed:
        if len(payload) > 4:
            ifd += struct.pack(e + "HHII", tag, type_, count, where + len(out_of_line))
            out_of_line += payload + (b"\0" if len(payload) % 2 else b"")
        else:
            ifd += struct.pack(e + "HHI", tag, type_, count) + payload.ljust(4, b"\0")
    ifd += struct.pack(e + "I", 0)
    return header + ifd + out_of_line + b"".join(strips)


def tiff_samples(width, height, samples, bits, big_endian=False, maximum=None):
    maximum = maximum if maximum is not None else (1 << bits) - 1
    e = ">" if big_endian else "<"
    if bits >= 8:
        fmt = "B" if bits == 8 else "H"
        return b"".join(struct.pack(e + fmt, rng.randint(0, maximum)) for _ in range(width * height * samples))
    return b"".join(pack_row([rng.randint(0, maximum) for _ in range(width * samples)], bits) for _ in range(height))


def tiffcp(source, name, *options):
    """A variant of a written TIFF made by libtiff's own tiffcp (compression, tiles, planes)."""
    src, dst = os.path.join(OUT, "tmp_" + name + "_in.tif"), os.path.join(OUT, "tmp_" + name + "_out.tif")
    with open(src, "wb") as f:
        f.write(source)
    subprocess.run(["tiffcp", *options, src, dst], check=True, capture_output=True)
    with open(dst, "rb") as f:
        data = f.read()
    os.remove(src)
    os.remove(dst)
    return data


def tiff_cases():
    w, h = 19, 11
    layouts = []  # (name, photometric, bits, samples, extras, big_endian)
    for big in (False, True):
        order = "mm" if big else "ii"
        layouts += [(f"{order}_bilevel_black0", 1, 1, 1, ()), (f"{order}_bilevel_white0", 0, 1, 1, ()),
                    (f"{order}_grey2", 1, 2, 1, ()), (f"{order}_grey4_white0", 0, 4, 1, ()),
                    (f"{order}_grey8", 1, 8, 1, ()), (f"{order}_grey8_white0", 0, 8, 1, ()),
                    (f"{order}_grey16", 1, 16, 1, ()), (f"{order}_grey_alpha8", 1, 8, 2, (2,)),
                    (f"{order}_rgb8", 2, 8, 3, ()), (f"{order}_rgba8_unassociated", 2, 8, 4, (2,)),
                    (f"{order}_rgba8_premultiplied", 2, 8, 4, (1,)), (f"{order}_rgbx8", 2, 8, 4, (0,)),
                    (f"{order}_rgba8_no_extras", 2, 8, 4, ()), (f"{order}_rgbaxx8", 2, 8, 6, (2, 0, 0)),
                    (f"{order}_rgb16", 2, 16, 3, ()), (f"{order}_rgba16_premultiplied", 2, 16, 4, (1,)),
                    (f"{order}_rgba16", 2, 16, 4, (2,)), (f"{order}_cmyk8", 5, 8, 4, ()),
                    (f"{order}_cmykx8", 5, 8, 5, (0,)), (f"{order}_palette4", 3, 4, 1, ()),
                    (f"{order}_palette8", 3, 8, 1, ()), (f"{order}_palette_alpha8", 3, 8, 2, (2,))]
        layouts = [layout + (big,) if len(layout) == 5 else layout for layout in layouts]
    layouts.append(("ii_cmyk16", 5, 16, 4, (), False))
    layouts.append(("ii_grey16_white0", 0, 16, 1, (), False))
    written = {}
    for name, photometric, bits, samples, extras, big in layouts:
        colormap = None
        if photometric == 3:
            colormap = [rng.randint(0, 65535) for _ in range(3 << bits)]
        data = tiff_samples(w, h, samples, bits, big)
        tiff = make_tiff(w, h, photometric, bits, samples, data, big, extras, colormap, rows_per_strip=4)
        written[name] = tiff
        add("tiff_" + name, tiff, ".tif")
    # Pillow's modes I and F: signed and 32-bit integers and floats, clipped by convert("RGB")
    for big in (False, True):
        e, order = (">" if big else "<"), ("mm" if big else "ii")
        values = [-70000, -300, -1, 0, 1, 77, 254, 255, 256, 1000, 40000, 2 ** 31 - 1]
        shorts = [v for v in values if -32768 <= v < 32768]
        add(f"tiff_{order}_grey16_signed", make_tiff(len(shorts), 1, 1, 16, 1, struct.pack(f"{e}{len(shorts)}h", *shorts),
                                                     big, sample_format=2), ".tif")
        add(f"tiff_{order}_grey32_signed", make_tiff(len(values), 1, 1, 32, 1, struct.pack(f"{e}{len(values)}i", *values),
                                                     big, sample_format=2), ".tif")
        floats = [-3.5, -0.2, 0.0, 0.4, 0.5, 0.99, 1.0, 100.5, 100.7, 254.5, 254.999, 255.0, 255.5, 1e9]
        for photometric in (0, 1):
            add(f"tiff_{order}_float32_photometric{photometric}", make_tiff(
                len(floats), 1, photometric, 32, 1, struct.pack(f"{e}{len(floats)}f", *floats), big, sample_format=3), ".tif")
    unsigned = [0, 1, 255, 256, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]
    add("tiff_ii_grey32_unsigned", make_tiff(len(unsigned), 1, 1, 32, 1, struct.pack(f"<{len(unsigned)}I", *unsigned)), ".tif")
    add("tiff_no_photometric_grey8", make_tiff(w, h, 0, 8, 1, tiff_samples(w, h, 1, 8), photometric_tag=False), ".tif")
    # orientation: Pillow 9.4 turns a TIFF by its tag when loading and again in exif_transpose
    rgb = asymmetric(w, h).tobytes()
    for value in range(1, 9):
        add(f"tiff_orientation_{value}", make_tiff(w, h, 2, 8, 3, rgb, orientation=value), ".tif")
        add(f"tiff_orientation_{value}_keep", make_tiff(w, h, 2, 8, 3, rgb, orientation=value), ".tif", mode="keep")
    # Pillow's own writer: compressions, and a multi-page file (first page)
    image = asymmetric(w, h)
    for compression in ("tiff_lzw", "tiff_adobe_deflate", "packbits", "jpeg"):
        add(f"tiff_pillow_rgb_{compression}", saved(image, "TIFF", compression=compression), ".tif")
    add("tiff_pillow_bilevel_group4", saved(image.convert("1"), "TIFF", compression="group4"), ".tif")
    add("tiff_pillow_grey_lzw", saved(image.convert("L"), "TIFF", compression="tiff_lzw"), ".tif")
    add("tiff_pillow_palette", saved(image.convert("P"), "TIFF"), ".tif")
    add("tiff_pillow_cmyk_deflate", saved(image.convert("CMYK"), "TIFF", compression="tiff_adobe_deflate"), ".tif")
    add("tiff_pillow_multipage", saved(image, "TIFF", save_all=True, append_images=[image.convert("L"), image.rotate(90)]), ".tif")
    if not have("tiffcp"):
        return
    variants = [("lzw", "-c", "lzw"), ("zip", "-c", "zip"), ("packbits", "-c", "packbits"),
                ("tiled_lzw", "-t", "-w", "16", "-l", "16", "-c", "lzw"), ("tiled", "-t", "-w", "16", "-l", "16"),
                ("planar_lzw", "-p", "separate", "-c", "lzw"), ("planar", "-p", "separate"),
                ("tiled_planar_zip", "-t", "-w", "16", "-l", "16", "-p", "separate", "-c", "zip"),
                ("fill_lsb", "-f", "lsb2msb"), ("fill_lsb_lzw", "-f", "lsb2msb", "-c", "lzw"),
                ("big_endian_lzw", "-B", "-c", "lzw"), ("strips1_zip", "-r", "1", "-c", "zip")]
    def variant_case(case, source, *options):
        try:
            add(case, tiffcp(source, case, *options), ".tif")
        except Exception as error:  # a layout tiffcp cannot write or Pillow cannot read is not a case
            print(f"make_image_cases: {case} left out: {error}", file=sys.stderr)
            CASES[:] = [c for c in CASES if c[0] != case]

    for name in ("ii_rgb8", "ii_rgba8_unassociated", "ii_rgb16", "ii_cmyk8", "ii_grey8", "ii_bilevel_white0",
                 "ii_palette4", "ii_grey16", "ii_rgba16", "ii_grey_alpha8"):
        for variant, *options in variants:
            variant_case(f"tiff_{name}_{variant}", written[name], *options)
    variant_case("tiff_rgb_jpeg_ycbcr", written["ii_rgb8"], "-c", "jpeg:90", "-r", "16")
    variant_case("tiff_grey_jpeg", written["ii_grey8"], "-c", "jpeg", "-r", "16")
    variant_case("tiff_bilevel_g3", written["ii_bilevel_white0"], "-c", "g3")
    variant_case("tiff_bilevel_g4_tiled", written["ii_bilevel_black0"], "-c", "g4", "-t", "-w", "16", "-l", "16")
    variant_case("tiff_multipage_first", written["ii_rgb8"] , "-c", "lzw")


# ------------------------------------------------------------------ HEIF / AVIF

def boxes(data, start=0, end=None):
    end = len(data) if end is None else end
    at = start
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        yield kind, at, size
        at += size


def add_transformations(heif, properties):
    """Adds property boxes (irot, imir, clap) to the primary item, fixing sizes and iloc offsets."""
    meta = next((at, size) for kind, at, size in boxes(heif) if kind == b"meta")
    meta_at, meta_size = meta
    children = {kind: (at, size) for kind, at, size in boxes(heif, meta_at + 12, meta_at + meta_size)}
    primary = struct.unpack(">H", heif[children[b"pitm"][0] + 12:children[b"pitm"][0] + 14])[0]
    iprp_at, iprp_size = children[b"iprp"]
    inner = {kind: (at, size) for kind, at, size in boxes(heif, iprp_at + 8, iprp_at + iprp_size)}
    ipco_at, ipco_size = inner[b"ipco"]
    ipma_at, ipma_size = inner[b"ipma"]
    existing = sum(1 for _ in boxes(heif, ipco_at + 8, ipco_at + ipco_size))
    new_ipco = heif[ipco_at:ipco_at + ipco_size] + b"".join(properties)
    new_ipco = struct.pack(">I", len(new_ipco)) + new_ipco[4:]
    version, flags = heif[ipma_at + 8], int.from_bytes(heif[ipma_at + 9:ipma_at + 12], "big")
    count = struct.unpack(">I", heif[ipma_at + 12:ipma_at + 16])[0]
    at, body = ipma_at + 16, b""
    for _ in range(count):
        id_size = 4 if version >= 1 else 2
        item = int.from_bytes(heif[at:at + id_size], "big")
        n = heif[at + id_size]
        width = 2 if flags & 1 else 1
        associations = heif[at + id_size + 1:at + id_size + 1 + n * width]
        at += id_size + 1 + n * width
        if item == primary:
            for i in range(len(properties)):
                index = existing + 1 + i
                associations += struct.pack(">H", 0x8000 | index) if width == 2 else bytes([0x80 | index])
            n += len(properties)
        body += item.to_bytes(id_size, "big") + bytes([n]) + associations
    new_ipma = heif[ipma_at + 8:ipma_at + 16] + body
    new_ipma = struct.pack(">I", len(new_ipma) + 8) + b"ipma" + new_ipma
    new_iprp_body = b""
    for kind, at, size in boxes(heif, iprp_at + 8, iprp_at + iprp_size):
        new_iprp_body += new_ipco if kind == b"ipco" else new_ipma if kind == b"ipma" else heif[at:at + size]
    new_iprp = struct.pack(">I", len(new_iprp_body) + 8) + b"iprp" + new_iprp_body
    delta = len(new_iprp) - iprp_size
    # iloc: items stored in the file (construction method 0) move by delta
    iloc_at, iloc_size = children[b"iloc"]
    iloc = bytearray(heif[iloc_at:iloc_at + iloc_size])
    version = iloc[8]
    offset_size, length_size = iloc[12] >> 4, iloc[12] & 15
    base_size, index_size = iloc[13] >> 4, (iloc[13] & 15) if version in (1, 2) else 0
    at = 14
    items = struct.unpack(">H", iloc[at:at + 2])[0] if version < 2 else struct.unpack(">I", iloc[at:at + 4])[0]
    at += 2 if version < 2 else 4
    for _ in range(items):
        at += 2 if version < 2 else 4
        method = 0
        if version in (1, 2):
            method = iloc[at + 1] & 15
            at += 2
        at += 2
        if base_size and method == 0:
            value = int.from_bytes(iloc[at:at + base_size], "big") + delta
            iloc[at:at + base_size] = value.to_bytes(base_size, "big")
        base_at = at
        at += base_size
        extents = struct.unpack(">H", iloc[at:at + 2])[0]
        at += 2
        for _ in range(extents):
            at += index_size
            if not base_size and method == 0:
                value = int.from_bytes(iloc[at:at + offset_size], "big") + delta
                iloc[at:at + offset_size] = value.to_bytes(offset_size, "big")
            at += offset_size + length_size
        del base_at
    body = b""
    for kind, at, size in boxes(heif, meta_at + 12, meta_at + meta_size):
        body += bytes(iloc) if kind == b"iloc" else new_iprp if kind == b"iprp" else heif[at:at + size]
    new_meta = struct.pack(">I", len(body) + 12) + heif[meta_at + 4:meta_at + 12] + body
    return heif[:meta_at] + new_meta + heif[meta_at + meta_size:]


def irot(quarter_turns):
    return struct.pack(">I4sB", 9, b"irot", quarter_turns)


def imir(axis):
    return struct.pack(">I4sB", 9, b"imir", axis)


def clap(width, height, full_width, full_height, dx, dy):
    # centre offsets relative to the image centre, as fractions
    return struct.pack(">I4s8i", 40, b"clap", width, 1, height, 1, 2 * dx + width - full_width, 2,
                       2 * dy + height - full_height, 2)


def heif_cases():
    if not (have("heif-enc") and have("heif-convert")):
        return

    def encode(name, png_bytes, *options):
        src, dst = os.path.join(OUT, f"tmp_{name}.png"), os.path.join(OUT, f"tmp_{name}{options[-1]}")
        with open(src, "wb") as f:
            f.write(png_bytes)
        subprocess.run(["heif-enc", *options[:-1], "-o", dst, src], check=True, capture_output=True)
        with open(dst, "rb") as f:
            data = f.read()
        os.remove(src)
        os.remove(dst)
        return data

    def add_heif(name, data, suffix):
        path = os.path.join(OUT, name + suffix)
        with open(path, "wb") as f:
            f.write(data)
        png = os.path.join(OUT, f"tmp_{name}_converted.png")
        subprocess.run(["heif-convert", "--quiet", path, png], check=True, capture_output=True)
        with Image.open(png) as converted:
            expected = converted.convert("RGB")
        for leftover in os.listdir(OUT):  # heif-convert may write auxiliary files beside it
            if leftover.startswith(f"tmp_{name}_converted"):
                os.remove(os.path.join(OUT, leftover))
        add(name, data, suffix, expected=expected)

    even, odd = asymmetric(48, 32), asymmetric(53, 37)
    for label, picture in (("even", even), ("odd", odd)):
        png = saved(picture, "PNG")
        add_heif(f"heic_{label}", encode(f"heic_{label}", png, "-q", "60", ".heic"), ".heic")
        add_heif(f"avif_{label}", encode(f"avif_{label}", png, "-q", "60", ".avif"), ".avif")
    alpha = even.convert("RGBA")
    alpha.putalpha(Image.linear_gradient("L").resize(alpha.size))
    add_heif("heic_alpha", encode("heic_alpha", saved(alpha, "PNG"), "-q", "70", ".heic"), ".heic")
    add_heif("avif_alpha", encode("avif_alpha", saved(alpha, "PNG"), "-q", "70", ".avif"), ".avif")
    # 10-bit AVIF from a 16-bit PNG: heif-convert writes 16-bit PNG, Pillow keeps the high byte
    deep = [[[(x * 1200 + y * 97) % 65536, (y * 2100) % 65536, (x * y * 41) % 65536] for x in range(48)] for y in range(32)]
    add_heif("avif_10bit", encode("avif_10bit", make_png(deep, 2, 16), "-b", "10", "-p", "chroma=422", "-q", "70", ".avif"),
             ".avif")  # aom in Debian 12 asserts on 10-bit 4:2:0 and 4:4:4
    add_heif("heic_10bit", encode("heic_10bit", make_png(deep, 2, 16), "-b", "10", "-q", "70", ".heic"), ".heic")
    heic = encode("heic_base", saved(even, "PNG"), "-q", "60", ".heic")
    avif = encode("avif_base", saved(even, "PNG"), "-q", "60", ".avif")
    for turns in (1, 2, 3):
        add_heif(f"heic_irot{turns}", add_transformations(heic, [irot(turns)]), ".heic")
    add_heif("avif_irot1", add_transformations(avif, [irot(1)]), ".avif")
    add_heif("heic_imir0", add_transformations(heic, [imir(0)]), ".heic")
    add_heif("heic_imir1", add_transformations(heic, [imir(1)]), ".heic")
    add_heif("heic_irot3_imir0", add_transformations(heic, [irot(3), imir(0)]), ".heic")
    add_heif("heic_clap", add_transformations(heic, [clap(30, 20, 48, 32, 6, 4)]), ".heic")
    add_heif("avif_clap_irot1", add_transformations(avif, [clap(30, 20, 48, 32, 2, 8), irot(1)]), ".avif")
    # EXIF orientation inside HEIF is not applied (heif-convert does not either)
    exif = Image.Exif()
    exif[0x0112] = 6
    jpeg = os.path.join(OUT, "tmp_exif.jpg")
    even.save(jpeg, quality=95, exif=exif.tobytes())
    out = os.path.join(OUT, "tmp_exif.heic")
    subprocess.run(["heif-enc", "-q", "60", "-o", out, jpeg], check=True, capture_output=True)
    with open(out, "rb") as f:
        add_heif("heic_with_exif_orientation_6", f.read(), ".heic")
    os.remove(jpeg)
    os.remove(out)
    add("heic_limit", heic, ".heic", mode="limit=1000", expected="refuse:too_large")
    add("avif_truncated", avif[:len(avif) * 2 // 3], ".avif", expected="refuse:bad_format")
    add("heic_truncated", heic[:len(heic) - 40], ".heic", expected="refuse:bad_format")
    add("heic_garbage_after_ftyp", heic[:32] + bytes(rng.randint(0, 255) for _ in range(200)), ".heic", expected="refuse:bad_format")


# ------------------------------------------------------------------ hostile files

def hostile_cases():
    image = asymmetric(33, 21)
    webp = saved(image, "WEBP", quality=80)
    add("webp_truncated", webp[:len(webp) // 2], ".webp", expected="refuse:bad_format")
    add("webp_garbage_after_header", webp[:16] + bytes(rng.randint(0, 255) for _ in range(100)), ".webp",
        expected="refuse:bad_format")
    # an animation whose VP8X canvas claims 16384 × 16384: over the default limit, refused before decoding
    animated = bytearray(saved(image, "WEBP", save_all=True, append_images=[image.transpose(Image.Transpose.ROTATE_180)],
                               lossless=True))
    assert animated.find(b"VP8X") > 0
    at = animated.find(b"VP8X") + 12
    animated[at:at + 6] = (16383).to_bytes(3, "little") * 2
    add("webp_huge_canvas", bytes(animated), ".webp", expected="refuse:too_large")
    add("webp_limit", webp, ".webp", mode="limit=100", expected="refuse:too_large")
    rgb = image.tobytes()
    tiff = make_tiff(33, 21, 2, 8, 3, rgb)
    add("tiff_truncated", tiff[:len(tiff) - 200], ".tif", expected="refuse:bad_format")
    add("tiff_garbage_after_header", tiff[:8] + bytes(rng.randint(0, 255) for _ in range(120)), ".tif",
        expected="refuse:bad_format")
    add("tiff_lying_size", make_tiff(100000, 100000, 2, 8, 3, rgb[:300]), ".tif",
        expected="refuse:too_large")
    add("tiff_limit", tiff, ".tif", mode="limit=100", expected="refuse:too_large")
    add("tiff_lab_unsupported", make_tiff(4, 4, 8, 8, 3, bytes(48)), ".tif", expected="refuse:unsupported")
    add("png_palette_truncated", make_png(noise(40, 30, 1, 15), 3, 4, True, png_chunk(b"PLTE", bytes(48)))[:-40], ".png",
        expected="refuse:bad_format")


# ------------------------------------------------------------------ PNM (decode_pnm.c) and stb's BMP, GIF, TGA

def refused_by_pillow(data):
    """Whether Pillow refuses these bytes too (a refusal case must be one for the reference as well)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.convert("RGB")
    except Exception:
        return True
    return False


def add_refused(name, data, suffix, status="bad_format"):
    assert status != "bad_format" or refused_by_pillow(data), name
    add(name, data, suffix, expected="refuse:" + status)


def pnm_cases():
    # PPM inputs are named .pnm: NAME.ppm is the reference
    own = random.Random(35)  # its own sequence: the cases above keep their bytes

    def samples(count, maximum):
        return [own.randint(0, maximum) for _ in range(count)]

    def raw(magic, width, height, maxval, values, header=None):
        wide = maxval > 255
        data = b"".join(v.to_bytes(2 if wide else 1, "big") for v in values)
        return (header or b"%s\n%d %d\n%d\n" % (magic, width, height, maxval)) + data

    def plain(magic, width, height, maxval, values, per_line=17):
        lines = [b" ".join(b"%d" % v for v in values[i:i + per_line]) for i in range(0, len(values), per_line)]
        return b"%s\n%d %d\n%d\n" % (magic, width, height, maxval) + b"\n".join(lines) + b"\n"

    # the 16-bit PGM of the over-read (about 100 KB): Pillow reads it as mode I and clips at 255 in RGB
    big = samples(224 * 224, 700)
    add("pnm_p5_maxval65535", raw(b"P5", 224, 224, 65535, big), ".pgm")
    add("pnm_p5_maxval65535_full_range", raw(b"P5", 31, 17, 65535, samples(31 * 17, 65535)), ".pgm")
    add("pnm_p5_maxval1000", raw(b"P5", 23, 11, 1000, samples(23 * 11, 1000)), ".pgm")
    add("pnm_p5_maxval100", raw(b"P5", 23, 11, 100, samples(23 * 11, 100)), ".pgm")
    add("pnm_p5_above_maxval", raw(b"P5", 23, 11, 100, samples(23 * 11, 255)), ".pgm")
    add("pnm_p5_maxval255", raw(b"P5", 23, 11, 255, samples(23 * 11, 255)), ".pgm")
    add("pnm_p6_maxval65535", raw(b"P6", 29, 13, 65535, samples(29 * 13 * 3, 65535)), ".pnm")
    add("pnm_p6_maxval4095", raw(b"P6", 29, 13, 4095, samples(29 * 13 * 3, 4095)), ".pnm")
    add("pnm_p6_above_maxval", raw(b"P6", 29, 13, 1000, samples(29 * 13 * 3, 65535)), ".pnm")
    add("pnm_p6_maxval15", raw(b"P6", 29, 13, 15, samples(29 * 13 * 3, 15)), ".pnm")
    add("pnm_p6_maxval255", raw(b"P6", 29, 13, 255, samples(29 * 13 * 3, 255)), ".pnm")
    add("pnm_p6_comments", raw(b"P6", 5, 4, 255, samples(60, 255),
                               b"P6\r\n# made by hand\r\n5\t#width\n4 # height\n2#a comment inside a number\n55\n"), ".pnm")
    bits = bytes(own.randint(0, 255) for _ in range(2 * 9))
    add("pnm_p4_width13", b"P4\n13 9\n" + bits, ".pbm")
    add("pnm_p1", b"P1\n# a comment\n7 3\n0101010 1111111\n00#inside\n00011\n", ".pbm")
    add("pnm_p2_maxval7", plain(b"P2", 19, 7, 7, samples(19 * 7, 7)), ".pgm")
    add("pnm_p2_maxval65535", plain(b"P2", 19, 7, 65535, samples(19 * 7, 65535)), ".pgm")
    add("pnm_p3_maxval255", plain(b"P3", 19, 7, 255, samples(19 * 7 * 3, 255)), ".pnm")
    add("pnm_p3_maxval1000", plain(b"P3", 19, 7, 1000, samples(19 * 7 * 3, 1000)), ".pnm")
    add("pnm_p3_comment_in_sample", b"P3\n2 1\n255\n1#c\n2 3 4 5 6 7\n", ".pnm")
    # refused: short data, lying headers, out-of-range values
    p5 = raw(b"P5", 224, 224, 65535, big)
    add_refused("pnm_p5_truncated", p5[:-1], ".pgm")
    add_refused("pnm_p6_truncated", raw(b"P6", 29, 13, 255, samples(29 * 13 * 3, 255))[:-5], ".pnm")
    add_refused("pnm_p4_truncated", b"P4\n13 9\n" + bits[:-1], ".pbm")
    add_refused("pnm_p1_truncated", b"P1\n7 3\n0101010 1111111\n0001\n", ".pbm")
    add_refused("pnm_p3_truncated", plain(b"P3", 19, 7, 255, samples(19 * 7 * 3 - 1, 255)), ".pnm")
    add_refused("pnm_p2_above_maxval", b"P2\n2 1\n7\n3 8\n", ".pgm")
    add_refused("pnm_maxval0", b"P5\n2 1\n0\n\0\0", ".pgm")
    add_refused("pnm_maxval65536", b"P5\n2 1\n65536\n" + bytes(8), ".pgm")
    add_refused("pnm_header_truncated", b"P6\n3 ", ".pnm")
    add_refused("pnm_token_too_long", b"P6\n00000000003 1\n255\n" + bytes(9), ".pnm")
    add_refused("pnm_not_a_number", b"P6\n3x 1\n255\n" + bytes(9), ".pnm")
    add_refused("pnm_lying_size", b"P6\n60000 60000\n255\n" + bytes(100), ".pnm", "too_large")
    add("pnm_limit", b"P5\n20 10\n255\n" + bytes(200), ".pgm", mode="limit=100", expected="refuse:too_large")


def stb_cases():
    """stb_image's formats (BMP, GIF, TGA) as Pillow writes them, cut short, with lying headers, and the
    published stb_image 2.27 bugs decode.c still has to stop (decode_stb_checks.c)."""
    own = random.Random(36)
    image = asymmetric(29, 13)
    palette = image.quantize(16)
    bmp, tga, gif = saved(image, "BMP"), saved(image, "TGA"), saved(palette, "GIF")
    add("bmp_rgb", bmp, ".bmp")
    add("bmp_palette", saved(palette, "BMP"), ".bmp")
    add("tga_rgb", tga, ".tga")
    add("tga_rle", saved(image, "TGA", compression="tga_rle"), ".tga")
    add("tga_grey", saved(image.convert("L"), "TGA"), ".tga")
    add("gif_palette", gif, ".gif")
    add_refused("bmp_truncated", bmp[:len(bmp) - 100], ".bmp")
    add_refused("gif_truncated", gif[:len(gif) // 2], ".gif")
    add_refused("tga_rle_truncated", saved(image, "TGA", compression="tga_rle")[:-60], ".tga")
    lying = bytearray(bmp)
    lying[18:26] = struct.pack("<ii", 20000, 20000)
    add_refused("bmp_lying_size", bytes(lying), ".bmp", "too_large")
    lying = bytearray(gif)
    lying[6:10] = struct.pack("<HH", 60000, 60000)
    add_refused("gif_lying_size", bytes(lying), ".gif", "too_large")
    add_refused("gif_garbage_after_header", gif[:13] + bytes(own.randint(0, 255) for _ in range(60)), ".gif")
    # CVE-2023-45663: an uncompressed TGA cut inside its last row (stb hands back uninitialised pixels)
    add_refused("tga_cve_2023_45663_truncated_row", tga[:18 + 29 * 13 * 3 - 7], ".tga")
    add_refused("tga_grey_truncated_row", saved(image.convert("L"), "TGA")[:18 + 29 * 13 - 3], ".tga")
    # CVE-2023-45661: a second frame disposed "to previous" (stb's two_back); decode.c reads the first frame only
    frames = [palette, image.transpose(Image.Transpose.ROTATE_180).quantize(16)]
    add("gif_cve_2023_45661_dispose_previous",
        saved(frames[0], "GIF", save_all=True, append_images=frames[1:], disposal=3, duration=50), ".gif")


png_cases()
png_orientation_cases()
jpeg_cases()
webp_cases()
tiff_cases()
heif_cases()
hostile_cases()
pnm_cases()
stb_cases()
with open(os.path.join(OUT, "cases.tsv"), "w") as f:
    for case in CASES:
        f.write("\t".join(case) + "\n")
print(f"make_image_cases: {len(CASES)} cases in {OUT}", file=sys.stderr)
