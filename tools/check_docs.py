#!/usr/bin/env python3
"""Keeps the docs true: every relative Markdown link in README.md and docs/**/*.md
resolves (file and #heading), and docs/knobs.md lists exactly the knobs kolo-info
prints, with their defaults and agreement.

usage: check_docs.py REPO_ROOT KOLO_INFO"""
import os, re, sys, unicodedata

root = sys.argv[1]
link_re = re.compile(r'(?<!\!)\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)|!\[[^\]]*\]\(([^)\s]+)\)')

def slug(text):
    text = re.sub(r'`', '', text.strip().lower())
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in ' -':
            out.append('-' if ch == ' ' else ch)
        elif ch == '_' or cat[0] in 'LN':
            out.append(ch)
    return ''.join(out)

def anchors(path):
    seen, result, fence = {}, set(), False
    for line in open(path, encoding='utf-8'):
        if line.lstrip().startswith('```'):
            fence = not fence
            continue
        m = None if fence else re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            result.add(s if n == 0 else f"{s}-{n}")
    return result

files = [os.path.join(root, "README.md")]
for d, _, names in os.walk(os.path.join(root, "docs")):
    files += [os.path.join(d, n) for n in names if n.endswith(".md")]
bad = checked = 0
for f in sorted(files):
    fence = False
    for lineno, line in enumerate(open(f, encoding='utf-8'), 1):
        if line.lstrip().startswith('```'):
            fence = not fence
            continue
        if fence:
            continue
        for m in link_re.finditer(line):
            target = m.group(2) or m.group(3)
            if re.match(r'[a-z]+:', target):
                continue
            checked += 1
            path, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(dest):
                print(f"{f}:{lineno}: {target}: no such file"); bad += 1; continue
            if frag and dest.endswith('.md') and frag not in anchors(dest):
                print(f"{f}:{lineno}: {target}: no heading #{frag} in {dest}"); bad += 1
print(f"{checked} relative links in {len(files)} files, {bad} broken")
links_bad = bad

import json, subprocess
info = json.loads(subprocess.run([sys.argv[2], '--json'], capture_output=True, text=True,
                                 check=True).stdout)['knobs']
text = open(os.path.join(root, 'docs/knobs.md'), encoding='utf-8').read()
table = text[text.index('## Every knob'):text.index('## The selection table')]
rows = {m.group(1): (m.group(2).strip().strip('`'), m.group(3).strip())
        for m in re.finditer(r'^\| `(KOLO_[A-Z_]+)` \| ([^|]+)\| ([^|]+)\|', table, re.M)}
bad = 0
for n, v in info.items():
    if n not in rows:
        print('not in docs/knobs.md:', n); bad += 1; continue
    d, a = rows[n]
    if d != (v['default'] or '(unset)'):
        print(n, 'default', d, 'vs', v['default']); bad += 1
    if not a.startswith(v['agreement']):
        print(n, 'agreement', a, 'vs', v['agreement']); bad += 1
for n in rows:
    if n not in info:
        print('not in kolo-info:', n); bad += 1
print(f"{len(info)} knobs in kolo-info, {len(rows)} in docs/knobs.md, {bad} differences")
sys.exit(1 if bad or links_bad else 0)
