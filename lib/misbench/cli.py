"""The ``misbench`` command: one subcommand per job, plus ``tables`` and ``sql`` for analysts."""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import decimal
import json
import logging
import re
import signal
import sys
import threading
from typing import Sequence

from misbench import logs
from misbench.config import ConfigError, load_config, project_dir
from misbench import pipeline
from misbench.pipeline import EXIT_TOO_MANY_REJECTS, STAGE_NAMES, StageFailed  # noqa: F401 (exit codes)

log = logging.getLogger("misbench")

EXIT_OK = 0
EXIT_FAILED = 1  # an unexpected failure; the traceback is in the log file
EXIT_ERROR = 2  # the user's input (config, paths, SQL)
EXIT_WORKER_CRASHED = 4


def _common_options(after_command: bool) -> argparse.ArgumentParser:
    """--profile, --lake and --set, accepted before and after the subcommand. After it they
    override what came before (--set adds to it): their defaults there must not overwrite."""
    common = argparse.ArgumentParser(add_help=False)
    unset = {"default": argparse.SUPPRESS} if after_command else {}
    common.add_argument("--profile", **(unset or {"default": "local"}),
                        help="conf/<name>.yaml or a path to a YAML file; several merge left to right "
                             "(databricks,paper) (default: local)")
    common.add_argument("--lake", metavar="DIR", **(unset or {"default": None}),
                        help="lake root folder (overrides lake.root)")
    common.add_argument("--set", dest="overrides_after" if after_command else "overrides", action="append",
                        default=[], metavar="KEY=VALUE", help="override a setting, e.g. ingest.split_mb=32")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(after_command=True)
    parser = argparse.ArgumentParser(prog="misbench", description=__doc__, parents=[_common_options(False)])
    commands = parser.add_subparsers(dest="command", required=True)

    ingest = commands.add_parser("ingest", parents=[common],
                                 help="parse Wikidata JSON dumps into entities and triples")
    ingest.add_argument("--dump", nargs="+", metavar="PATH",
                        help="dump files or globs (.json, .json.bz2, .json.gz); "
                             "default: the demo dump shipped with the project")
    ingest.add_argument("--max-reject-rate", type=float, metavar="R",
                        help="fraction of entity lines that may be rejected (default from config)")
    ingest.add_argument("--allow-older-dump", action="store_true",
                        help="take a dump older than the one the lake was last built from")

    claims = commands.add_parser("claims", parents=[common],
                                 help="build claims and conflicting claims from the ingested tables")
    claims.add_argument("--from-2wiki", nargs="+", metavar="PATH", default=[],
                        help="also import 2WikiMultihopQA JSON files (compositional, inference)")
    claims.add_argument("--enrich", action="store_true",
                        help="fetch missing labels and types over SPARQL (claims.enrich.*)")

    generate = commands.add_parser("generate", parents=[common],
                                   help="generate evidence and misinformation texts with the LLM")
    generate.add_argument("--limit", type=int, metavar="N", help="only the first N claims (by claim_id); 0: all")

    commands.add_parser("quality", parents=[common],
                        help="check generated texts: completeness, entailment, question similarity")

    commands.add_parser("bench", parents=[common],
                        help="assemble multiple-choice questions from claims and the texts that passed quality")

    evaluate = commands.add_parser("evaluate", parents=[common],
                                   help="evaluate models on the questions: MR, TendCM, detection, RtD; MLflow runs")
    evaluate.add_argument("--model", nargs="+", metavar="NAME", default=None,
                          help="models to evaluate: a model of the configured backend, or BACKEND:MODEL "
                               "(llama_cpp, vllm, openai, fake); default: the configured model")
    evaluate.add_argument("--settings", nargs="+", metavar="SETTING",
                          help="probe detection single pair style desc rtd (default: evaluate.settings)")
    evaluate.add_argument("--source", default="wikidata",
                          help="question set: wikidata (built here) or the name of an imported set")
    evaluate.add_argument("--limit", type=int, metavar="N", help="only the first N questions (by id)")
    evaluate.add_argument("--version", metavar="DUMP_VERSION",
                          help="benchmark version: the questions of that dump (default: the latest; see dump_versions)")

    export = commands.add_parser("export", parents=[common], help="write the questions for other tools")
    export.add_argument("--format", choices=("hf", "lm-eval"), required=True)
    export.add_argument("--out", required=True, metavar="DIR")
    export.add_argument("--source", default="wikidata")
    export.add_argument("--version", metavar="DUMP_VERSION",
                        help="benchmark version: the questions of that dump (default: the latest; see dump_versions)")

    imported = commands.add_parser("import-misbench", parents=[common],
                                   help="read question files in the published MisBench release format")
    imported.add_argument("files", nargs="+", metavar="FILE", help="JSON lines (or a JSON array) of records")
    imported.add_argument("--name", default="misbench-release", help="source name of the imported set")

    commands.add_parser("hoax", parents=[common],
                        help="build MultiHoax-style false-premise questions from the graph (hoax_questions)")
    hoax_evaluate = commands.add_parser("hoax-evaluate", parents=[common],
                                        help="evaluate models on hoax_questions: choice, justification, JSON")
    hoax_evaluate.add_argument("--model", nargs="+", metavar="NAME", default=None,
                               help="models to evaluate, as for evaluate (default: the configured model)")
    hoax_evaluate.add_argument("--tasks", nargs="+", metavar="TASK", choices=("choice", "justification", "json"),
                               help="choice justification json (default: hoax.evaluate.tasks)")
    hoax_evaluate.add_argument("--source", default="wikidata",
                               help="question set: wikidata (built here) or the name of an imported set")
    hoax_evaluate.add_argument("--limit", type=int, metavar="N", help="only the first N questions (by id)")
    import_hoax = commands.add_parser("import-hoax", parents=[common],
                                      help="read question files in the MultiHoax release format")
    import_hoax.add_argument("files", nargs="+", metavar="FILE", help="JSON, JSON lines or CSV")
    import_hoax.add_argument("--name", default="multihoax-release", help="source name of the imported set")

    human_eval = commands.add_parser("human-eval", help="human evaluation of the quality filters")
    steps = human_eval.add_subparsers(dest="step", required=True)
    export = steps.add_parser("export", parents=[common],
                              help="write a stratified sample sheet (CSV and XLSX) for annotators")
    export.add_argument("--out", default="human_eval", metavar="DIR", help="folder for the sheets")
    export.add_argument("--size", type=int, metavar="N", help="texts to sample (default from config)")
    imported = steps.add_parser("import", parents=[common],
                                help="read filled sheets; report agreement, kappa and filter accuracy")
    imported.add_argument("sheets", nargs="+", metavar="SHEET", help="filled .csv or .xlsx copies")

    run_all = commands.add_parser(
        "run-all", parents=[common],
        help="every stage in order (ingest to hoax-evaluate and the analyst views); finished stages are skipped")
    run_all.add_argument("--dump", nargs="+", metavar="PATH", help="as for ingest (default: the demo dump)")
    run_all.add_argument("--allow-older-dump", action="store_true", help="as for ingest")
    run_all.add_argument("--limit", type=int, metavar="N",
                         help="only the first N claims get generated texts (the costly step); 0: all")
    run_all.add_argument("--model", nargs="+", metavar="NAME", default=None,
                         help="models to evaluate, as for evaluate (default: the configured model)")
    run_all.add_argument("--from", dest="start", choices=STAGE_NAMES, metavar="STAGE",
                         help=f"start at this stage ({', '.join(STAGE_NAMES)}); earlier ones are left as they are")
    run_all.add_argument("--force", action="store_true",
                         help="run every stage even when it finished before on the same inputs")

    commands.add_parser("views", parents=[common],
                        help="store the analyst views (conf/views/*.sql) in the lake or catalog")

    tables = commands.add_parser("tables", parents=[common], help="list the lake's product tables")
    tables.add_argument("--all", action="store_true", dest="include_internal",
                        help="also the internal tables (staging, queues, chunks)")

    sql = commands.add_parser("sql", parents=[common], help="run Spark SQL over the lake's tables")
    sql.add_argument("query", help="SQL; tables are referred to by name, e.g. entities; the parameters "
                     ":reference_date, :functional_premises and :disjoint_premises are filled in from the configuration")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    return parser


def _open(args):
    from misbench.lake import open_lake
    from misbench.spark import get_spark

    overrides = list(args.overrides) + list(getattr(args, "overrides_after", []))
    if args.lake:
        overrides.append(f"lake.root={args.lake}")
    if getattr(args, "allow_older_dump", False):
        overrides.append("ingest.allow_older_dump=true")
    if getattr(args, "max_reject_rate", None) is not None:
        overrides.append(f"ingest.max_reject_rate={args.max_reject_rate}")
    cfg = load_config(args.profile, overrides)
    logs.attach_file(cfg)
    if str(cfg.get("spark.master")).startswith("local"):
        # The model servers this command's tasks start run on this machine: they end with it,
        # in a registry of its own, so two commands at once never stop each other's servers.
        import atexit
        import os
        import shutil
        import tempfile

        from misbench.llm.servers import PRIVATE_REGISTRY_VARIABLE, claim_servers, stop_servers

        if not cfg.get("llm.server.dir") and not os.environ.get("MISBENCH_ENGINE_DIR"):
            registry = os.environ["MISBENCH_ENGINE_DIR"] = tempfile.mkdtemp(prefix="misbench-engines-")
            os.environ[PRIVATE_REGISTRY_VARIABLE] = "1"
            atexit.register(shutil.rmtree, registry, True)  # after the servers stopped (LIFO)
        atexit.register(stop_servers, cfg.get("llm"), claim_servers())
    spark = get_spark(cfg)
    return cfg, spark, open_lake(spark, cfg)


def _cmd_ingest(args) -> int:
    cfg, spark, lake = _open(args)
    try:
        print(pipeline.ingest_stage(spark, lake, cfg, _dumps(args, cfg)))
    except StageFailed as failed:
        print(failed.summary, file=sys.stderr)
        return failed.exit_code
    return EXIT_OK


def _dumps(args, cfg) -> list[str]:
    return args.dump or [str(project_dir() / cfg.get("ingest.default_dump"))]


def _cmd_claims(args) -> int:
    if args.enrich:
        args.overrides.append("claims.enrich.enabled=true")
    cfg, spark, lake = _open(args)
    print(pipeline.claims_stage(spark, lake, cfg, args.from_2wiki))
    return EXIT_OK


def _cmd_generate(args) -> int:
    cfg, spark, lake = _open(args)
    print(pipeline.generate_stage(spark, lake, cfg, args.limit))
    return EXIT_OK


def _stage_command(summary):
    """A subcommand that runs one stage with no options of its own and prints its report."""
    def command(args) -> int:
        cfg, spark, lake = _open(args)
        print(summary(spark, lake, cfg))
        return EXIT_OK
    return command


def _cmd_evaluate(args) -> int:
    if args.limit:
        args.overrides.append(f"evaluate.limit={args.limit}")
    cfg, spark, lake = _open(args)
    print(pipeline.evaluate_stage(spark, lake, cfg, args.model, args.settings, args.source, args.version))
    return EXIT_OK


def _cmd_export(args) -> int:
    from misbench.evaluate.job import run_export

    cfg, spark, lake = _open(args)
    print(run_export(spark, lake, cfg, args.format, args.out, args.source, args.version))
    return EXIT_OK


def _cmd_import_misbench(args) -> int:
    from misbench.bench.job import run_import

    cfg, spark, lake = _open(args)
    report = run_import(spark, lake, cfg, args.files, args.name)
    print(f"import-misbench: {report.records} records -> {report.questions} questions (source {report.source}), "
          f"{report.rejects} rejected (see import_rejects); evaluate with --source {report.source}")
    return EXIT_OK


def _cmd_hoax_evaluate(args) -> int:
    if args.limit:
        args.overrides.append(f"hoax.evaluate.limit={args.limit}")
    cfg, spark, lake = _open(args)
    print(pipeline.hoax_evaluate_stage(spark, lake, cfg, args.model, args.tasks, args.source))
    return EXIT_OK


def _cmd_run_all(args) -> int:
    cfg, spark, lake = _open(args)
    dumps = _dumps(args, cfg)
    runners = pipeline.stage_runners(spark, lake, cfg, dumps, args.limit, args.model)
    arguments = pipeline.stage_arguments(dumps, args.start, args.limit, args.model)
    try:
        report = pipeline.run_all(spark, lake, cfg, runners, arguments, start=args.start, force=args.force)
    except StageFailed as failed:
        print(failed.summary, file=sys.stderr)
        print("run-all: stopped; fix the cause and run the same command again: finished stages are skipped",
              file=sys.stderr)
        return failed.exit_code
    print(pipeline.run_summary(spark, lake, cfg, report))
    return EXIT_OK


def _cmd_import_hoax(args) -> int:
    from misbench.hoax.job import run_hoax_import

    cfg, spark, lake = _open(args)
    report = run_hoax_import(spark, lake, cfg, args.files, args.name)
    print(f"import-hoax: {report.records} records -> {report.questions} questions (source {report.source}), "
          f"{report.rejects} rejected (see hoax_import_rejects); evaluate with "
          f"misbench hoax-evaluate --source {report.source}")
    return EXIT_OK


def _cmd_human_eval(args) -> int:
    from pathlib import Path

    from misbench.quality import human_job

    cfg, spark, lake = _open(args)
    if args.step == "export":
        report = human_job.export_sample(spark, lake, cfg, Path(args.out), args.size)
        print(f"human-eval: {report.rows} texts from {report.strata} strata (kind x style x hop) -> "
              f"{report.csv_path}, {report.xlsx_path}; rating guide in the rubric tab and RUBRIC.md")
        return EXIT_OK
    rows = human_job.import_sheets(spark, lake, cfg, [Path(p) for p in args.sheets])
    for row in rows:
        row["value"] = None if row["value"] is None else round(row["value"], 4)
    _print_rows(rows, ["metric", "rubric", "annotator", "value", "items"], "table")
    print("human-eval: written to human_eval_labels and human_eval_report")
    return EXIT_OK


def _cmd_tables(args) -> int:
    _, _, lake = _open(args)
    rows = [
        {"table": t.name, "rows": t.rows, "version": t.version, "location": t.location}
        for t in lake.tables(include_internal=args.include_internal)
    ]
    _print_rows(rows, ["table", "rows", "version", "location"], "table")
    return EXIT_OK


def _cmd_sql(args) -> int:
    from misbench.sql_parameters import run_sql

    cfg, spark, lake = _open(args)
    lake.register_views(for_query=args.query)
    result = run_sql(spark, cfg, args.query)
    columns = result.columns
    rows = [row.asDict(recursive=True) for row in result.collect()]
    _print_rows(rows, columns, args.format)
    return EXIT_OK


def _plain(value):
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def _print_rows(rows: list[dict], columns: Sequence[str], fmt: str) -> None:
    out = sys.stdout
    if fmt == "json":
        out.write(json.dumps(rows, default=_plain, ensure_ascii=False) + "\n")
        return
    if fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(
                [json.dumps(v, default=_plain) if isinstance(v, (list, dict)) else _plain(v)
                 for v in (row[c] for c in columns)]
            )
        return
    text = [[("NULL" if v is None else str(_plain(v))) for v in (row[c] for c in columns)]
            for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in text:
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


COMMANDS = {
    "ingest": _cmd_ingest, "claims": _cmd_claims, "generate": _cmd_generate, "quality": _stage_command(pipeline.quality_stage),
    "bench": _stage_command(pipeline.bench_stage), "evaluate": _cmd_evaluate, "export": _cmd_export,
    "import-misbench": _cmd_import_misbench, "hoax": _stage_command(pipeline.hoax_stage), "hoax-evaluate": _cmd_hoax_evaluate,
    "import-hoax": _cmd_import_hoax, "human-eval": _cmd_human_eval, "tables": _cmd_tables, "sql": _cmd_sql,
    "run-all": _cmd_run_all, "views": _stage_command(pipeline.views_stage),
}


def _stop_on_sigterm(signum, frame) -> None:
    # A scheduler's stop (SIGTERM) ends the command as an error does: the exit handlers
    # stop its LLM engines and Spark, which a bare SIGTERM would leave running.
    raise SystemExit(128 + signal.SIGTERM)


def main(argv: Sequence[str] | None = None) -> int:
    logs.setup_terminal()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
    args = build_parser().parse_args(argv)
    from pyspark.errors import AnalysisException

    from misbench.chunked import WorkerCrashed, worker_crash_cause

    try:
        return COMMANDS[args.command](args)
    except (ConfigError, FileNotFoundError, KeyError, ValueError, AnalysisException) as exc:
        # Errors in the user's input (config, paths, SQL): a message, not a traceback.
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"misbench {args.command}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except WorkerCrashed as exc:
        logs.record_detail(f"misbench {args.command}: {exc.label}: worker crashed", exc)
        print(f"misbench {args.command}: error: {exc}{_see_log()}", file=sys.stderr)
        return EXIT_WORKER_CRASHED
    except Exception as exc:  # noqa: BLE001 - the short story here, the whole one in the log
        logs.record_detail(f"misbench {args.command}: failed", exc)
        cause = worker_crash_cause(exc)
        if cause is not None:  # outside a model pass (a Python UDF of another step)
            print(f"misbench {args.command}: error: a Python worker died ({cause}). Committed work "
                  f"is kept; rerun the same command to continue.{_see_log()}", file=sys.stderr)
            return EXIT_WORKER_CRASHED
        model_failure = _MODEL_FAILURE.search(str(exc))
        if model_failure:  # raised in a Spark task: its own line, not Spark's wrapping
            print(f"misbench {args.command}: failed: {model_failure.group(1)}{_see_log()}", file=sys.stderr)
            return EXIT_FAILED
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"misbench {args.command}: failed: {type(exc).__name__}: {first_line}{_see_log()}",
              file=sys.stderr)
        return EXIT_FAILED


# A model endpoint that cannot serve the stage, or a server that could not start (its one line).
_MODEL_FAILURE = re.compile(r"(?:EndpointError|ServerFailedToStart): ([^\n]+)")


def _see_log() -> str:
    path = logs.current_file()
    return f"\nFull traceback and Spark's log: {path}" if path else ""


if __name__ == "__main__":
    sys.exit(main())
