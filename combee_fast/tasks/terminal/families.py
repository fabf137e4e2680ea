"""The chore families of the terminal task: each is one knowledge unit (the thing a lesson
teaches), with a generator of instances from seeded parameters, the oracle's commands and the
plausible mistakes of an agent that does not know it.

Every family writes instances whose mistakes really fail the checks and whose oracle really
passes them (``tests/tasks/test_terminal.py`` runs both in the sandbox). Commands use only
POSIX ``sh``, coreutils, findutils, grep, sed, awk, tar and ``python3``.
"""

from __future__ import annotations

import base64
import gzip
import io
import random
import string
import tarfile
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec

from combee_fast.tasks.terminal.chores import Check, Chore, FileSpec

DAY_S = 86_400


class Family(msgspec.Struct, frozen=True):
    """A chore family: ``name`` is the knowledge unit lessons are about; ``lessons`` what an
    agent must know to get it right. Its instances come from :data:`MAKERS` (:func:`make_chore`)."""

    key: str
    name: str
    lessons: tuple[str, ...]


def _chore(family: str, instruction: str, files: list[FileSpec], checks: list[Check], oracle: list[str],
           mistakes: list[list[str]]) -> Chore:
    return Chore("", family, instruction, tuple(files), tuple(checks), tuple(oracle),
                 tuple(tuple(m) for m in mistakes))


def _word(rng: random.Random, low: int = 4, high: int = 8) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))


def _lines(items: list[str]) -> str:
    return "".join(f"{item}\n" for item in items)


# --------------------------------------------------------------------------- the families


def numeric_sort(rng: random.Random) -> Chore:
    while True:
        numbers = [rng.choice([rng.randint(1, 9), rng.randint(10, 99), rng.randint(100, 9999)])
                   for _ in range(rng.randint(7, 12))]
        if sorted(numbers) != sorted(numbers, key=str):
            break
    source, target = rng.choice(["nums.txt", "values.txt", "scores.txt", "sizes.txt"]), rng.choice(
        ["sorted.txt", "ordered.txt", "ascending.txt"])
    return _chore(
        "numeric_sort",
        f"The file {source} holds one integer per line. Write the same integers to {target}, sorted in "
        "ascending numeric order, one per line.",
        [FileSpec(source, _lines([str(n) for n in numbers]))],
        [Check("text", target, _lines([str(n) for n in sorted(numbers)]))],
        [f"sort -n {source} > {target}"],
        [[f"sort {source} > {target}"]],
    )


def csv_quoted_column(rng: random.Random) -> Chore:
    cities = ["Lyon", "Porto", "Graz", "Turku", "Leeds", "Bergen", "Ghent", "Brno"]
    rows, wanted = [], []
    for index in range(rng.randint(4, 7)):
        last, first = _word(rng).title(), _word(rng).title()
        city = rng.choice(cities)
        name = f'"{last}, {first}"' if index == 0 or rng.random() < 0.6 else first
        rows.append(f"{index + 1},{name},{city},{rng.randint(10, 500)}")
        wanted.append(city)
    source, target = rng.choice(["people.csv", "contacts.csv", "staff.csv"]), rng.choice(["cities.txt", "towns.txt"])
    return _chore(
        "csv_quoted_column",
        f"{source} is a CSV file with a header line (id,name,city,amount); some names are quoted and contain "
        f"a comma. Write the city of every row, in file order, one per line, to {target}.",
        [FileSpec(source, _lines(["id,name,city,amount", *rows]))],
        [Check("text", target, _lines(wanted))],
        [f"python3 -c 'import csv; rows = csv.DictReader(open(\"{source}\")); "
         f"print(\"\\n\".join(r[\"city\"] for r in rows))' > {target}"],
        [[f"tail -n +2 {source} | cut -d, -f3 > {target}"]],
    )


def in_place_replace(rng: random.Random) -> Chore:
    old, new = rng.choice([("localhost", "db.internal"), ("staging", "production"), ("8080", "9090"),
                           ("alice", "bob"), ("v1", "v2")])
    keys = [_word(rng, 3, 6) for _ in range(rng.randint(4, 6))]
    lines = [f"{key} = {old}/{_word(rng, 2, 4)}" for key in keys]
    doubled = rng.randrange(len(lines))
    lines[doubled] = f"{keys[doubled]} = {old} {old}"
    lines.insert(0, f"# settings for {_word(rng)}")
    source = rng.choice(["settings.conf", "app.ini", "service.cfg"])
    text = _lines(lines)
    return _chore(
        "in_place_replace",
        f"In {source}, replace every occurrence of '{old}' with '{new}' (some lines hold it twice), editing the "
        "file in place. Leave every other file as it is.",
        [FileSpec(source, text)],
        [Check("text", source, text.replace(old, new))],
        [f"sed -i 's/{old}/{new}/g' {source}"],
        [[f"sed -i 's/{old}/{new}/' {source}"], [f"sed 's/{old}/{new}/g' {source} > {source}"]],
    )


def find_by_size(rng: random.Random) -> Chore:
    kib = rng.choice([1, 2, 3])
    sizes = [kib * 1024 + rng.randint(1, 900), kib * 512 + rng.randint(1, kib * 500), rng.randint(10, kib * 400),
             kib * 1024 + rng.randint(900, 3000), kib * 512 + rng.randint(1, kib * 500)]
    names = [f"{_word(rng, 3, 6)}.dat" for _ in sizes]
    files = [FileSpec(f"data/{name}", "0123456789abcdef\n", size=size) for name, size in zip(names, sizes)]
    big = sorted(name for name, size in zip(names, sizes) if size > kib * 1024)
    return _chore(
        "find_by_size",
        f"Write the names (without the folder) of the files in data/ that are larger than {kib} KiB "
        f"({kib * 1024} bytes), sorted by name, one per line, to big.txt.",
        files,
        [Check("text", "big.txt", _lines(big))],
        [f"find data -type f -size +{kib}k -printf '%f\\n' | sort > big.txt"],
        [[f"find data -type f -size +{kib} -printf '%f\\n' | sort > big.txt"]],
    )


def find_by_age(rng: random.Random) -> Chore:
    days = rng.choice([2, 3, 5, 7])
    ages = [days * DAY_S + 6 * 3600, (days + 2) * DAY_S, (days - 1) * DAY_S, 3600, days * DAY_S + 9 * 3600]
    names = [f"{_word(rng, 3, 6)}.log" for _ in ages]
    files = [FileSpec(f"logs/{name}", f"entry {index}\n", age_s=age)
             for index, (name, age) in enumerate(zip(names, ages))]
    old = sorted(name for name, age in zip(names, ages) if age > days * DAY_S)
    return _chore(
        "find_by_age",
        f"Write the names (without the folder) of the files in logs/ last modified more than {days} days "
        f"({days * 24} hours) ago, sorted by name, one per line, to old.txt.",
        files,
        [Check("text", "old.txt", _lines(old))],
        [f"find logs -type f -mmin +{days * 1440} -printf '%f\\n' | sort > old.txt"],
        [[f"find logs -type f -mtime +{days} -printf '%f\\n' | sort > old.txt"]],
    )


def json_filter(rng: random.Random) -> Chore:
    limit = rng.choice([25, 30, 40])
    users: list[dict[str, Any]] = [{"name": _word(rng).title(), "age": rng.randint(18, 70), "active": rng.random() < 0.5}
                                   for _ in range(rng.randint(5, 8))]
    users[0]["age"] = limit  # one at the limit itself: not older
    wanted = [u["name"] for u in users if u["age"] > limit]
    if not wanted:
        users[-1]["age"] = limit + 5
        wanted = [users[-1]["name"]]
    source = rng.choice(["users.json", "members.json"])
    return _chore(
        "json_filter",
        f"{source} is a JSON array of user records. Write the names of the users older than {limit} "
        f"(age > {limit}), in the order they appear, one per line, to names.txt.",
        [FileSpec(source, msgspec.json.format(msgspec.json.encode(users), indent=2).decode() + "\n")],
        [Check("text", "names.txt", _lines(wanted))],
        [f"python3 -c 'import json; users = json.load(open(\"{source}\")); "
         f"print(\"\\n\".join(u[\"name\"] for u in users if u[\"age\"] > {limit}))' > names.txt"],
        [[f"grep -o '\"name\": \"[^\"]*\"' {source} | cut -d'\"' -f4 > names.txt"]],
    )


def word_frequency(rng: random.Random) -> Chore:
    vocabulary = [_word(rng, 3, 7) for _ in range(5)]
    counts = {word: count for word, count in zip(vocabulary, rng.sample(range(1, 7), 5))}
    words = [word for word, count in counts.items() for _ in range(count)]
    rng.shuffle(words)
    while any(a == b for a, b in zip(words, words[1:])) and len(set(words)) > 1:
        rng.shuffle(words)
    ordered = sorted(Counter(words).items(), key=lambda item: (-item[1], item[0]))
    return _chore(
        "word_frequency",
        "Count how often each word occurs in words.txt (one word per line). Write one line per distinct word, "
        "'COUNT WORD', most frequent first (ties in alphabetical order), to counts.txt.",
        [FileSpec("words.txt", _lines(words))],
        [Check("text", "counts.txt", _lines([f"{count} {word}" for word, count in ordered]))],
        ["sort words.txt | uniq -c | sort -k1,1nr -k2,2 | awk '{print $1, $2}' > counts.txt"],
        [["uniq -c words.txt | sort -k1,1nr -k2,2 | awk '{print $1, $2}' > counts.txt"]],
    )


def crlf_to_lf(rng: random.Random) -> Chore:
    lines = [" ".join(_word(rng) for _ in range(rng.randint(2, 6))) for _ in range(rng.randint(3, 7))]
    source = rng.choice(["notes.txt", "readme.txt", "todo.txt"])
    return _chore(
        "crlf_to_lf",
        f"{source} has Windows line endings (CRLF). Convert it in place to Unix line endings (LF), changing "
        "nothing else.",
        [FileSpec(source, "".join(f"{line}\r\n" for line in lines))],
        [Check("bytes", source, _lines(lines))],
        [f"sed -i 's/\\r$//' {source}"],
        [[f"dos2unix {source}"], [f"tr -d '\\r' < {source} > {source}"]],
    )


def tsv_column_sum(rng: random.Random) -> Chore:
    rows = []
    for _ in range(rng.randint(4, 7)):
        product = " ".join(_word(rng, 3, 6) for _ in range(rng.choice([1, 2, 2, 3])))
        rows.append((rng.choice(["north", "south", "east"]), product, rng.randint(1, 90)))
    if all(" " not in product for _, product, _ in rows):
        rows[0] = (rows[0][0], rows[0][1] + " plus", rows[0][2])
    text = "region\tproduct name\tunits\n" + "".join(f"{r}\t{p}\t{u}\n" for r, p, u in rows)
    return _chore(
        "tsv_column_sum",
        "sales.tsv is tab-separated with a header line (region, product name, units). Write the sum of the "
        "units column to total.txt.",
        [FileSpec("sales.tsv", text)],
        [Check("number", "total.txt", str(sum(u for _, _, u in rows)))],
        ["awk -F'\\t' 'NR > 1 { s += $3 } END { print s }' sales.tsv > total.txt"],
        [["awk 'NR > 1 { s += $3 } END { print s }' sales.tsv > total.txt"]],
    )


def count_hidden_files(rng: random.Random) -> Chore:
    files = [FileSpec(f"project/{_word(rng, 3, 6)}.py", "pass\n") for _ in range(rng.randint(2, 4))]
    files += [FileSpec(f"project/.{_word(rng, 3, 6)}", "x\n") for _ in range(rng.randint(1, 3))]
    files += [FileSpec(f"project/{_word(rng, 3, 5)}/{_word(rng, 3, 6)}.txt", "y\n") for _ in range(rng.randint(1, 3))]
    unique = {spec.path: spec for spec in files}
    return _chore(
        "count_hidden_files",
        "Count every regular file under project/, in all of its subfolders and including hidden files, and write "
        "the number to count.txt.",
        list(unique.values()),
        [Check("number", "count.txt", str(len(unique)))],
        ["find project -type f | wc -l > count.txt"],
        [["ls project | wc -l > count.txt"], ["find project -type f -not -name '.*' | wc -l > count.txt"]],
    )


def line_range(rng: random.Random) -> Chore:
    total = rng.randint(15, 30)
    first = rng.randint(2, total // 2)
    last = rng.randint(first + 2, total - 1)
    lines = [f"{index + 1:03d} {_word(rng)} {_word(rng)}" for index in range(total)]
    return _chore(
        "line_range",
        f"Write lines {first} to {last} of log.txt (both included, counting from 1) to excerpt.txt.",
        [FileSpec("log.txt", _lines(lines))],
        [Check("text", "excerpt.txt", _lines(lines[first - 1:last]))],
        [f"sed -n '{first},{last}p' log.txt > excerpt.txt"],
        [[f"head -n {last} log.txt | tail -n {last - first} > excerpt.txt"]],
    )


def make_executable(rng: random.Random) -> Chore:
    token = _word(rng, 6, 10)
    script = rng.choice(["build.sh", "setup.sh", "deploy.sh"])
    return _chore(
        "make_executable",
        f"The script {script} writes its result to result.txt when it runs. Make it executable and run it "
        f"as ./{script}.",
        [FileSpec(script, f"#!/bin/sh\necho \"done {token}\" > result.txt\n")],
        [Check("text", "result.txt", f"done {token}\n"), Check("executable", script)],
        [f"chmod +x {script} && ./{script}"],
        [[f"./{script}"], [f"sh {script}"]],
    )


def fix_python_script(rng: random.Random) -> Chore:
    while True:
        values = [rng.randint(1, 50) for _ in range(rng.randint(3, 6))]
        if sum(values) % len(values):
            break
    script = (
        "import sys\n\n"
        "values = [int(line) for line in open(sys.argv[1]) if line.strip()]\n"
        "mean = sum(values) // len(values)\n"
        "print(f\"{mean:.2f}\")\n"
    )
    return _chore(
        "fix_python_script",
        "stats.py should print the mean of the numbers in data.txt with two decimals, but the value it prints is "
        "wrong. Fix the bug in stats.py, then write what `python3 stats.py data.txt` prints to mean.txt.",
        [FileSpec("stats.py", script), FileSpec("data.txt", _lines([str(v) for v in values]))],
        [Check("text", "mean.txt", f"{sum(values) / len(values):.2f}\n")],
        ["sed -i 's|//|/|' stats.py", "python3 stats.py data.txt > mean.txt"],
        [["python3 stats.py data.txt > mean.txt"]],
    )


def case_insensitive_grep(rng: random.Random) -> Chore:
    word = rng.choice(["error", "warning", "timeout", "denied"])
    lines = []
    for index in range(rng.randint(8, 14)):
        spelled = rng.choice([word, word.upper(), word.title(), None, None])
        lines.append(f"12:{index:02d} {_word(rng)} {spelled or _word(rng)} {_word(rng)}")
    lines[1] = f"12:01 {_word(rng)} {word.upper()} {_word(rng)}"
    lines[2] = f"12:02 {_word(rng)} {word} {_word(rng)}"
    return _chore(
        "case_insensitive_grep",
        f"Write every line of app.log that contains '{word}' in any letter case (e.g. {word.upper()}) to "
        "matches.txt, in their original order.",
        [FileSpec("app.log", _lines(lines))],
        [Check("text", "matches.txt", _lines([line for line in lines if word in line.lower()]))],
        [f"grep -i {word} app.log > matches.txt"],
        [[f"grep {word} app.log > matches.txt"]],
    )


def whole_word_rename(rng: random.Random) -> Chore:
    old, new = rng.choice([("cnt", "count"), ("idx", "index"), ("tmp", "scratch"), ("len", "size")])
    limit = rng.randint(5, 99)
    text = (
        f"int {old}_max = {limit};\n"
        f"int {old} = 0;\n"
        f"void reset_{old}(void) {{ {old} = 0; }}\n"
        f"int next(void) {{ {old} = {old} + 1; return {old} < {old}_max; }}\n"
    )
    renamed = text.replace(f"{old}_max", "\0").replace(f"reset_{old}", "\1").replace(old, new)
    renamed = renamed.replace("\0", f"{old}_max").replace("\1", f"reset_{old}")
    source = rng.choice(["main.c", "counter.c", "loop.c"])
    return _chore(
        "whole_word_rename",
        f"In {source}, rename the variable {old} to {new} everywhere, in place, without changing other "
        f"identifiers that contain {old} (such as {old}_max or reset_{old}).",
        [FileSpec(source, text)],
        [Check("text", source, renamed)],
        [f"sed -i 's/\\b{old}\\b/{new}/g' {source}"],
        [[f"sed -i 's/{old}/{new}/g' {source}"]],
    )


def dedupe_keep_order(rng: random.Random) -> Chore:
    emails = [f"{_word(rng, 3, 6)}@{rng.choice(['example.org', 'mail.test'])}" for _ in range(rng.randint(4, 6))]
    emails.sort(reverse=True)
    lines = emails + [rng.choice(emails) for _ in range(rng.randint(2, 4))]
    rng.shuffle(lines)
    unique = list(dict.fromkeys(lines))
    if unique == sorted(unique):
        lines.insert(0, lines.pop())
        unique = list(dict.fromkeys(lines))
    return _chore(
        "dedupe_keep_order",
        "Write the lines of emails.txt to unique.txt without duplicates, keeping the first occurrence of each line "
        "and the original order.",
        [FileSpec("emails.txt", _lines(lines))],
        [Check("text", "unique.txt", _lines(unique))],
        ["awk '!seen[$0]++' emails.txt > unique.txt"],
        [["sort -u emails.txt > unique.txt"]],
    )


def _tarball(members: dict[str, str]) -> bytes:
    """A gzipped tar of ``members`` (path -> text), byte for byte the same every time."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for path, text in members.items():
            info = tarfile.TarInfo(path)
            data = text.encode()
            info.size, info.mode, info.mtime = len(data), 0o644, 1_700_000_000
            archive.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def extract_one(rng: random.Random) -> Chore:
    wanted = rng.choice(["readme.txt", "notes.txt", "guide.txt"])
    members = {f"docs/{wanted}": f"{_word(rng)} {_word(rng)}\n", "docs/changes.txt": "v1\n",
               "src/main.py": "print('hi')\n", f"src/{_word(rng, 3, 6)}.py": "pass\n"}
    others = [path for path in members if path != f"docs/{wanted}"]
    return _chore(
        "extract_one",
        f"Extract only docs/{wanted} from archive.tar.gz into the current folder (it keeps its path "
        f"docs/{wanted}); extract nothing else.",
        [FileSpec("archive.tar.gz", b64=base64.b64encode(_tarball(members)).decode())],
        [Check("text", f"docs/{wanted}", members[f"docs/{wanted}"]), *(Check("absent", path) for path in others)],
        [f"tar -xzf archive.tar.gz docs/{wanted}"],
        [["tar -xzf archive.tar.gz"]],
    )


def count_nonblank(rng: random.Random) -> Chore:
    lines = []
    for _ in range(rng.randint(6, 12)):
        lines.append(" ".join(_word(rng) for _ in range(rng.randint(1, 5))) if rng.random() < 0.65 else "")
    lines[1] = ""
    lines[-1] = _word(rng)
    source = rng.choice(["notes.md", "draft.md", "story.txt"])
    return _chore(
        "count_nonblank",
        f"Write the number of non-empty lines of {source} to lines.txt.",
        [FileSpec(source, _lines(lines))],
        [Check("number", "lines.txt", str(sum(1 for line in lines if line)))],
        [f"grep -c . {source} > lines.txt"],
        [[f"wc -l < {source} > lines.txt"]],
    )


def sort_by_column(rng: random.Random) -> Chore:
    rows = [(_word(rng).title(), rng.choice([rng.randint(2, 9), rng.randint(10, 99)]))
            for _ in range(rng.randint(5, 8))]
    rows[0] = (rows[0][0], 7)
    rows[1] = (rows[1][0], 42)
    ages = [age for _, age in rows]
    while len(set(ages)) != len(ages):
        rows = [(name, age + index) for index, (name, age) in enumerate(rows)]
        ages = [age for _, age in rows]
    ordered = sorted(rows, key=lambda row: row[1])
    return _chore(
        "sort_by_column",
        "people.tsv is tab-separated (name, age) without a header. Write its lines to by_age.tsv sorted by age, "
        "youngest first.",
        [FileSpec("people.tsv", "".join(f"{name}\t{age}\n" for name, age in rows))],
        [Check("text", "by_age.tsv", "".join(f"{name}\t{age}\n" for name, age in ordered))],
        ["sort -t \"$(printf '\\t')\" -k2,2n people.tsv > by_age.tsv"],
        [["sort -k2 people.tsv > by_age.tsv"]],
    )


FAMILIES: tuple[Family, ...] = (
    Family("numeric_sort", "Numeric sort", (
        "plain sort compares lines as text, so 10 sorts before 9: use sort -n for numbers",
        "check the first and last lines of a sorted number list; sort -n keeps duplicates unless -u is given")),
    Family("csv_quoted_column", "CSV quoted fields", (
        "cut -d, splits inside quoted fields such as \"Smith, John\": read CSV with python3's csv module",
        "select CSV columns by header name (csv.DictReader) rather than by comma position")),
    Family("in_place_replace", "In-place edits", (
        "sed s/a/b/ replaces only the first match of each line: add the g flag to replace every occurrence",
        "never redirect a file into itself (cmd f > f empties it first): use sed -i to edit in place")),
    Family("find_by_size", "Find by size", (
        "find -size +N counts 512-byte blocks: write -size +Nk for kibibytes",
        "find -printf '%f\\n' prints names without their folder; sort the list for a stable order")),
    Family("find_by_age", "Find by age", (
        "find -mtime +N rounds ages down to whole days (+2 means at least 3 days): use -mmin for exact hours",
        "to match 'more than N days ago' exactly, use find -mmin +(N*1440)")),
    Family("json_filter", "JSON queries", (
        "grep cannot filter JSON records by a field's value: load the file with python3's json module",
        "keep the records' order when filtering JSON: iterate the parsed array")),
    Family("word_frequency", "Word counts", (
        "uniq -c only counts adjacent duplicates: sort the input before uniq -c",
        "rank counts with sort -k1,1nr and break ties with a second key, -k2,2")),
    Family("crlf_to_lf", "Line endings", (
        "dos2unix is often not installed: strip the carriage returns with sed -i 's/\\r$//'",
        "tr and sed read and write whole streams: never redirect a file into itself")),
    Family("tsv_column_sum", "Tab-separated columns", (
        "awk splits on any whitespace by default: set -F'\\t' for tab-separated files with spaces in fields",
        "skip the header line with NR > 1 before summing a column")),
    Family("count_hidden_files", "Counting files", (
        "ls skips hidden files and does not descend into folders: count files with find DIR -type f | wc -l",
        "a file whose name starts with a dot is a regular file too: do not exclude it")),
    Family("line_range", "Line ranges", (
        "lines A to B inclusive are B - A + 1 lines: sed -n 'A,Bp' avoids off-by-one arithmetic",
        "head -n B | tail -n (B - A + 1) also works; tail -n (B - A) drops line A")),
    Family("make_executable", "Executable scripts", (
        "a script needs its execute bit before ./script runs: chmod +x it first",
        "sh script runs the code but leaves the file not executable: set the mode when asked to")),
    Family("fix_python_script", "Python script fixes", (
        "in Python 3, // is floor division: a mean needs /",
        "fix the script in place (sed -i or a small edit), then run it and save its output")),
    Family("case_insensitive_grep", "Case-insensitive search", (
        "grep is case-sensitive: use grep -i to match ERROR, Error and error alike",
        "grep keeps the input's line order; redirect its output to the file asked for")),
    Family("whole_word_rename", "Whole-word replacement", (
        "s/cnt/count/ also changes cnt_max: anchor the name with \\b...\\b in sed",
        "rename identifiers with word boundaries so longer names that contain them stay intact")),
    Family("dedupe_keep_order", "Removing duplicates", (
        "sort -u reorders lines: awk '!seen[$0]++' drops duplicates and keeps the first occurrence in order",
        "uniq alone only drops adjacent duplicates")),
    Family("extract_one", "Archive extraction", (
        "tar -xzf ARCHIVE PATH extracts only that member: name it as tar -tzf lists it",
        "list an archive with tar -tzf before extracting, so nothing unwanted is written")),
    Family("count_nonblank", "Counting lines", (
        "wc -l counts every line, empty ones included: grep -c . counts the non-empty lines",
        "a count file should hold only the number: use wc -l < file or grep -c, not wc -l file")),
    Family("sort_by_column", "Sorting by a column", (
        "sort -k2 compares from field 2 as text: use -k2,2n for a numeric column",
        "give sort the field separator with -t when fields are tab-separated")),
)
"""Every family, in the order chores are generated."""

MAKERS: dict[str, Callable[[random.Random], Chore]] = {
    "numeric_sort": numeric_sort, "csv_quoted_column": csv_quoted_column, "in_place_replace": in_place_replace,
    "find_by_size": find_by_size, "find_by_age": find_by_age, "json_filter": json_filter,
    "word_frequency": word_frequency, "crlf_to_lf": crlf_to_lf, "tsv_column_sum": tsv_column_sum,
    "count_hidden_files": count_hidden_files, "line_range": line_range, "make_executable": make_executable,
    "fix_python_script": fix_python_script, "case_insensitive_grep": case_insensitive_grep,
    "whole_word_rename": whole_word_rename, "dedupe_keep_order": dedupe_keep_order, "extract_one": extract_one,
    "count_nonblank": count_nonblank, "sort_by_column": sort_by_column,
}

BY_KEY = {family.key: family for family in FAMILIES}


def make_chore(family: Family, index: int) -> Chore:
    """Instance ``index`` of ``family``, drawn from the seed ``terminal/<family>/<index>``."""
    chore = MAKERS[family.key](random.Random(f"terminal/{family.key}/{index}"))
    return msgspec.structs.replace(chore, id=f"{family.key}-{index:02d}")
