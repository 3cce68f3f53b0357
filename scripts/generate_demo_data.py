"""Write a deterministic historical RSS dump (JSONL, optionally gzip) for the example.

Thousands of realistic items from a dozen feeds, about 1 in 5 a YouTube link, with some
exact duplicates (the same entry fetched twice) and some invalid rows (missing title,
bad URL, unparsable date, malformed JSON) so the ingest path is exercised.

``--keys random`` makes URLs as real feeds have them (a hash in the path), so the dedup key
arrives in random order; the default ``sorted`` numbers the posts, so keys arrive nearly in
index order (the friendly case for the topic's unique index).

Usage: python scripts/generate_demo_data.py [--items 5000] [--seed 7] [--start 0] [--keys sorted|random] [OUT]
       (default OUT: data/rss_dump.jsonl; a .gz suffix writes gzip)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

FEEDS = ["selfhosted.blog", "sqlite.org/news", "spark.apache.org", "homelab.weekly", "pythonbytes",
         "lwn.net", "hn.frontpage", "kafka.digest", "ml.papers", "rust.weekly", "devops.daily", "data.eng"]
TOPICS = ["SQLite", "Spark", "homelab", "self-hosting", "Kafka", "Python", "backups", "ZFS", "Proxmox",
          "Raspberry Pi", "LLM", "DuckDB", "Parquet", "Kubernetes", "cron"]
VERBS = ["Running", "Tuning", "Debugging", "Scaling down", "Backing up", "Migrating", "Benchmarking", "Replacing"]
WORDS = ("the a small fast durable typed queue ledger pipeline nightly job cluster file table index write read "
         "commit crash safe simple local model summary feed item topic stage batch").split()


def body(rng: random.Random) -> str:
    return ". ".join(" ".join(rng.choices(WORDS, k=rng.randint(6, 14))).capitalize()
                     for _ in range(rng.randint(2, 8))) + "."


def key_hash(i: int, length: int) -> str:
    """A hex digest of item number ``i``: the same item gets the same URL in every run."""
    return hashlib.blake2b(str(i).encode(), digest_size=16).hexdigest()[:length]


def item(rng: random.Random, i: int, start: datetime, keys: str = "sorted") -> dict:
    feed = rng.choice(FEEDS)
    title = f"{rng.choice(VERBS)} {rng.choice(TOPICS)} {rng.choice(['at home', 'in production', 'on a Pi', 'for fun', 'the hard way'])}"
    slug = title.lower().replace(' ', '-')
    if rng.random() < 0.2:
        url = f"https://www.youtube.com/watch?v={i:08x}" if keys == "sorted" else \
            f"https://www.youtube.com/watch?v={key_hash(i, 11)}"
    elif keys == "sorted":
        url = f"https://{feed}/posts/{i}-{slug}"
    else:  # random order: a hash where the post number was (same length of key as real feeds')
        url = f"https://{feed}/{key_hash(i, 12)}/{slug}"
    published = start + timedelta(minutes=17 * i + rng.randint(0, 16))
    return {"url": url, "feed": feed, "title": title, "body": body(rng), "published": published.isoformat()}


def generate(n: int, seed: int, first: int = 0, keys: str = "sorted") -> list[str]:
    rng = random.Random(seed + first)
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    lines: list[str] = []
    for i in range(first, first + n):
        row = item(rng, i, start, keys)
        roll = rng.random()
        if roll < 0.01:
            row.pop("title")
        elif roll < 0.02:
            row["url"] = "not a url"
        elif roll < 0.025:
            row["published"] = "yesterday-ish"
        elif roll < 0.03:
            lines.append(json.dumps(row)[:-7])  # truncated line: malformed JSON
            continue
        lines.append(json.dumps(row, ensure_ascii=False))
        if rng.random() < 0.04 and lines:
            lines.append(lines[rng.randrange(len(lines))])  # the same entry fetched twice
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="data/rss_dump.jsonl")
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", type=int, default=0, help="first item number (for later batches)")
    parser.add_argument("--gzip-level", type=int, default=9, choices=range(1, 10), metavar="1-9",
                        help="gzip compression level of a .gz OUT (1: fastest)")
    parser.add_argument("--keys", choices=("sorted", "random"), default="sorted",
                        help="URLs numbered in order (sorted) or hashed (random order, as real keys arrive)")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(generate(args.items, args.seed, args.start, args.keys)) + "\n"
    if out.suffix == ".gz":
        with gzip.open(out, "wt", encoding="utf-8", compresslevel=args.gzip_level) as fh:
            fh.write(text)
    else:
        out.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} lines to {out}")


if __name__ == "__main__":
    main()
