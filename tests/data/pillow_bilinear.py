"""Writes pillow_bilinear.json: Pillow's Image.resize with BILINEAR (resample 2,
ViTImageProcessor's) of a synthetic 37 x 23 RGB picture, shrinking and
enlarging, the reference test_vision holds vision/resize.c to. Run with the
Debian Python (Pillow 9.4): /usr/bin/python3 tests/data/pillow_bilinear.py"""
import json
import os

import PIL
from PIL import Image

WIDTH, HEIGHT = 37, 23
SIZES = [(10, 7), (60, 60), (36, 22), (5, 23), (37, 50), (1, 1)]


def source():
    image = Image.new("RGB", (WIDTH, HEIGHT))
    image.putdata([((x * 7 + y * 13) % 256, (x * x + 3 * y) % 256, (x * y * 5 + 11) % 256)
                   for y in range(HEIGHT) for x in range(WIDTH)])
    return image


cases = []
for width, height in SIZES:
    resized = source().resize((width, height), Image.BILINEAR)
    cases.append({"width": width, "height": height, "pixels": [v for p in resized.getdata() for v in p]})
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pillow_bilinear.json")
with open(out, "w") as f:
    json.dump({"pillow": PIL.__version__, "width": WIDTH, "height": HEIGHT,
               "source": "r = (7x + 13y) % 256, g = (x*x + 3y) % 256, b = (5xy + 11) % 256", "cases": cases}, f)
