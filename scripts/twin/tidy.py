"""twin/tidy.py: the tidy CSV, its reps CSV and the JSON of the PyTorch side, in the core's
fixed schema (bench/driver/tidy_columns.def, read here: the single source of truth) and with
the fixed columns as bench/driver/harness_csv.cc writes them (docs/results-format.md).
Standard library only."""
import json
import math
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEF_PATH = os.path.join(ROOT, "bench", "driver", "tidy_columns.def")

FIXED = ("practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,"
         "time_unit,time_median,time_stddev,time_min,time_max,time_cv,cache,precision_target,"
         "precision_reached,stop").split(",")
REPS_FIXED = "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations".split(",")


def read_schema(path=DEF_PATH):
    """{"version": V, "param": [...], "counter": [...], "context": [...]} from tidy_columns.def."""
    out = {"version": None, "param": [], "counter": [], "context": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("//"):
                continue
            m = re.match(r"#define TIDY_SCHEMA_VERSION (\d+)", line)
            if m:
                out["version"] = m.group(1)
            m = re.match(r"TIDY_(PARAM|COUNTER|CONTEXT)\((\w+)\)", line)
            if m:
                out[m.group(1).lower()].append(m.group(2))
    if out["version"] is None or not out["counter"]:
        raise ValueError("%s: no TIDY_SCHEMA_VERSION or no columns" % path)
    return out


def field(s):
    """A CSV field as harness_csv.cc writes it: no commas, quotes or newlines."""
    return str(s).replace(",", ";").replace("\n", " ").replace("\r", " ").replace('"', "")


def num(v):
    """%.9g, empty when not a finite number (harness_csv.cc num)."""
    if v is None or isinstance(v, str):
        return "" if v is None else field(v)
    v = float(v)
    return "" if not math.isfinite(v) else "%.9g" % v


def _extra(names, schema_names):
    known = set(schema_names)
    return sorted(n for n in names if n not in known)


def columns(schema, results, with_context):
    """(kind, name) after the fixed columns: the schema's, then names beyond it (sorted)."""
    params, counters = set(), set()
    for res in results:
        params.update(res["params"].keys())
        for rep in res["reps"]:
            counters.update(rep["counters"].keys())
        counters.update(res.get("counters", {}).keys())
    cols = [("param", n) for n in schema["param"]] + [("counter", n) for n in schema["counter"]]
    beyond = [("param", n) for n in _extra(params, schema["param"])]
    beyond += [("counter", n) for n in _extra(counters, schema["counter"])]
    if with_context is not None:
        cols += [("context", n) for n in schema["context"]]
        # the context's keys beyond the schema (build/context's *_library paths, no_gpu_reason)
        # stay in the JSON, as the core keeps its *_library keys out of the CSV
    return cols, beyond


def _name(kind, n):
    return {"param": "param_" + n, "context": "ctx_" + n, "counter": n}[kind]


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _mean(xs):
    return sum(xs) / len(xs) if xs else math.nan


def tidy_text(schema, results, context, precision):
    cols, beyond = columns(schema, results, context)
    cols = cols + beyond
    lines = [",".join(FIXED + [_name(k, n) for k, n in cols])]
    for res in results:
        times = [r["time"] for r in res["reps"]]
        has = res["status"] in ("ok", "partial") and times
        mean = _mean(times) if has else math.nan
        sd = math.nan
        if has:
            sd = math.sqrt(sum((t - mean) ** 2 for t in times) / (len(times) - 1)) if len(times) > 1 else 0.0
        iters = _mean([r["iterations"] for r in res["reps"]])
        out = [field(res["practice"]), field(res["variant"]), res["role"], "wall", field(res["params_text"]),
               res["status"], field(res["reason"]), str(len(res["reps"]) if res["reps"] else 1),
               num(iters if res["reps"] else 1),
               num(mean), num(_mean([r["cpu_time"] for r in res["reps"]]) if has else None),
               "us", num(_median(times) if has else None), num(sd),
               num(min(times) if has else None), num(max(times) if has else None),
               num(sd / mean if has and len(times) > 1 and mean > 0 else None), "",
               num(precision if precision > 0 else None), num(res.get("precision_reached") if has else None),
               field(res.get("stop", ""))]
        for kind, n in cols:
            if kind == "param":
                out.append(field(res["params"].get(n, "")))
            elif kind == "context":
                out.append(field(context.get(n, "")))
            else:
                vals = [r["counters"][n] for r in res["reps"] if n in r["counters"]]
                if n in res.get("counters", {}):
                    vals = vals or [res["counters"][n]]
                out.append(num(_mean(vals)) if vals and (has or n.startswith("check_")) else "")
        lines.append(",".join(out))
    return "\n".join(lines) + "\n"


def reps_text(schema, results):
    cols, beyond = columns(schema, results, None)
    head = REPS_FIXED + [_name(k, n) for k, n in cols] + ["sequence"] + [_name(k, n) for k, n in beyond]
    lines = [",".join(head)]
    for res in results:
        if res["status"] not in ("ok", "partial"):
            continue
        for k, r in enumerate(res["reps"]):
            out = [field(res["practice"]), field(res["variant"]), res["role"], "wall", field(res["params_text"]),
                   str(k + 1), num(r["time"]), num(r["cpu_time"]), "us", str(r["iterations"])]

            def value(kind, n):
                if kind == "param":
                    return field(res["params"].get(n, ""))
                return num(r["counters"].get(n))
            out += [value(kd, n) for kd, n in cols] + [str(r["sequence"])] + [value(kd, n) for kd, n in beyond]
            lines.append(",".join(out))
    return "\n".join(lines) + "\n"


def json_doc(results, context):
    """Google-Benchmark-compatible JSON: the context and one entry per repetition (a skipped or
    failed row: one entry with error_occurred and its message)."""
    entries = []
    for res in results:
        name = res["name"]
        if res["status"] in ("skipped", "error"):
            prefix = "SKIPPED: " if res["status"] == "skipped" else "ERROR: "
            entries.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                            "repetition_index": 0, "threads": 1, "iterations": 0, "real_time": 0, "cpu_time": 0,
                            "time_unit": "us", "error_occurred": True, "error_message": prefix + res["reason"]})
            continue
        for k, r in enumerate(res["reps"]):
            e = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": len(res["reps"]),
                 "repetition_index": k, "threads": 1, "iterations": r["iterations"], "real_time": r["time"],
                 "cpu_time": r["cpu_time"], "time_unit": "us"}
            e.update({c: v for c, v in r["counters"].items() if isinstance(v, (int, float)) and math.isfinite(v)})
            entries.append(e)
    return {"context": context, "benchmarks": entries}


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def reps_path(csv_path):
    stem = csv_path[:-4] if csv_path.endswith(".csv") else csv_path
    return stem + ".reps.csv"


def partial_path(csv_path):
    stem = csv_path[:-4] if csv_path.endswith(".csv") else csv_path
    return stem + ".partial"


def write_all(csv_path, json_path, schema, results, context, precision):
    if csv_path:
        write_atomically(csv_path, tidy_text(schema, results, context, precision))
        write_atomically(reps_path(csv_path), reps_text(schema, results))
    if json_path:
        write_atomically(json_path, json.dumps(json_doc(results, context), indent=1) + "\n")
