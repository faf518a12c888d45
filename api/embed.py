#!/usr/bin/env python3
"""Turn a file into a C array so umd serves the committed bytes exactly.

usage: embed.py INPUT OUTPUT SYMBOL
Writes `const char SYMBOL[]` (NUL-terminated, the NUL not counted) and `const size_t SYMBOL_len`.
"""
import sys


def main() -> int:
    src, dst, sym = sys.argv[1:4]
    with open(src, "rb") as f:
        data = f.read()
    out = [f"/* Generated from {src.split('/')[-1]} by api/embed.py: do not edit. */",
           "#include <stddef.h>",
           f"extern const char {sym}[];",
           f"extern const size_t {sym}_len;",
           f"const char {sym}[] = {{"]
    for i in range(0, len(data), 16):
        out.append("        " + ", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ",")
    out.append("        0x00,")
    out.append("};")
    out.append(f"const size_t {sym}_len = {len(data)};")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
