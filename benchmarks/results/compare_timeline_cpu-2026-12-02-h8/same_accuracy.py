import gzip, json, sys
def untimed(d):
    if isinstance(d, dict):
        return {k: untimed(v) for k, v in d.items() if k != "seconds"}
    return [untimed(v) for v in d] if isinstance(d, list) else d
runs = {f: json.load((gzip.open if f.endswith(".gz") else open)(f, "rt")) for f in sys.argv[1:]}  # .json.gz since issue 41
acc = {f: [untimed(c["accuracy"]) for c in d["comparisons"]] for f, d in runs.items()}
first = next(iter(acc.values()))
for f, a in acc.items():
    print(f, "same accuracy JSON as", sys.argv[1], a == first, [c["verdict"]["verdict"] for c in a], [round(c["cosine"], 9) for c in a])
