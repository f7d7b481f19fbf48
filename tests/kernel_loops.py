#!/usr/bin/env python3
"""kernel_loops.py ARCHIVE FUNCTION... — checks that the product kernels keep their sums in registers.

Every innermost loop of each FUNCTION (compiled into ARCHIVE, the core library) that does at least 8 multiply-adds
(vfmadd...ps, vpdpbusd, vdpbf16ps) must store no vector register to the stack: a micro-kernel whose compiler kept
its sums in memory stores them all at every step of the depth, and runs at a third of the FMA loop's rate on an AMD
EPYC Zen 4 (gcc 12 did so for the float32 micro-kernel after an inline asm's memory operand changed). Each FUNCTION
must have at least one such loop, so that a renamed or reshaped kernel fails here rather than passing unseen.
Reads the disassembly of objdump (binutils). Exit status 0: all kept in registers; 1: a loop stores; 2: usage."""
import re
import subprocess
import sys

BRANCH = re.compile(r"j\w+\s+([0-9a-f]+)")
MULTIPLY_ADD = re.compile(r"^(vfn?m(add|sub)\d+ps|vpdpbusds?|vdpbf16ps)\b")
STACK_STORE = re.compile(r"^vmov\w*\s+%zmm\d+,(-?0x[0-9a-f]+)?\(%rsp\)")


def functions(archive):
    """{name without gcc's .constprop/.isra suffixes: [[(address, instruction)] per copy]} from objdump -d (each
    copy apart: copies in different members of the archive have addresses of their own)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", archive], capture_output=True, text=True,
                          check=True).stdout
    found, current = {}, None
    for line in text.splitlines():
        head = re.match(r"^[0-9a-f]+ <([^>]+)>:", line)
        if head:
            current = []
            found.setdefault(head.group(1).split(".")[0], []).append(current)
            continue
        instruction = re.match(r"\s+([0-9a-f]+):\s+(.*)", line)
        if instruction and current is not None:
            current.append((int(instruction.group(1), 16), instruction.group(2).strip()))
    return found


def innermost_loops(code):
    """(first, last, body) of each backward branch whose body holds no other backward branch."""
    backward = [(int(m.group(1), 16), address) for address, text in code
                for m in [BRANCH.match(text)] if m and int(m.group(1), 16) < address]
    for first, last in backward:
        if any(first <= target < branch and branch < last for target, branch in backward):
            continue
        yield first, last, [text for address, text in code if first <= address <= last]


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    found, failed = functions(sys.argv[1]), False
    for name in sys.argv[2:]:
        loops = [(first, last, body) for code in found.get(name, []) for first, last, body in innermost_loops(code)
                 if sum(bool(MULTIPLY_ADD.match(text)) for text in body) >= 8]
        storing = [(first, last, sum(bool(STACK_STORE.match(text)) for text in body)) for first, last, body in loops]
        storing = [loop for loop in storing if loop[2]]
        if not loops:
            print(f"{name}: no loop of multiply-adds found in {sys.argv[1]} (renamed, or not compiled here?)")
            failed = True
        elif storing:
            print(f"{name}: {len(storing)} of its {len(loops)} loops of multiply-adds store vectors to the stack:")
            for first, last, stores in storing:
                print(f"  {first:#x}-{last:#x}: {stores} stores a pass")
            failed = True
        else:
            print(f"{name}: {len(loops)} loops of multiply-adds, their sums in registers")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
