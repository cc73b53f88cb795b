"""Profiles, overrides and their errors."""
import pytest

from misbench.config import ConfigError, load_config


def test_profiles_merge_over_base_and_overrides_win():
    local = load_config("local")
    assert local.get("lake.backend") == "delta_rs"
    assert local.get("ingest.languages") == ["en"]  # from base.yaml
    databricks = load_config("databricks")
    assert databricks.get("lake.backend") == "spark_delta"
    assert databricks.get("lake.catalog") == "main"
    tuned = local.with_overrides(["ingest.max_reject_rate=0.05", "ingest.languages=[en, de]",
                                  "spark.master=null"])
    assert tuned.get("ingest.max_reject_rate") == 0.05
    assert tuned.get("ingest.languages") == ["en", "de"]
    assert tuned.get("spark.master") is None
    assert local.get("ingest.max_reject_rate") == 0.001  # the original is unchanged


def test_a_spark_setting_is_one_dotted_name_below_spark_conf():
    """`--set spark.conf.spark.sql.shuffle.partitions=4` sets Spark's setting of that name (it
    used to nest sections, and Spark ignored a setting named "spark")."""
    tuned = load_config("local").with_overrides(["spark.conf.spark.sql.shuffle.partitions=4",
                                                 "spark.conf.spark.driver.extraJavaOptions=-Da=b"])
    conf = tuned.get("spark.conf")
    assert conf["spark.sql.shuffle.partitions"] == 4 and conf["spark.driver.extraJavaOptions"] == "-Da=b"
    assert "spark" not in conf and conf["spark.sql.session.timeZone"] == "UTC"  # the profile's stay


def test_profile_may_be_a_file(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("lake:\n  root: /data/lake\ningest:\n  split_mb: 64\n")
    cfg = load_config(str(own))
    assert cfg.get("lake.root") == "/data/lake" and cfg.get("ingest.split_mb") == 64
    assert cfg.get("ingest.languages") == ["en"]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: load_config("nope"), "unknown profile 'nope'"),
        (lambda: load_config("local", ["ingest.split_mb"]), "not of the form"),
        (lambda: load_config("local", ["ingest.split_mb.x=1"]), "is not a section"),
        (lambda: load_config("local").get("ingest.nothing"), "missing setting 'ingest.nothing'"),
    ],
)
def test_errors_name_the_culprit(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


def test_invalid_yaml_is_reported_with_its_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("lake: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML"):
        load_config(str(bad))


def test_each_stage_reruns_for_its_own_prompts_only():
    """A changed evaluation prompt reruns evaluation, not generation; every shipped prompt
    belongs to a stage; a file no stage claims (system.txt, one of your own) counts for all."""
    from misbench.pipeline import STAGES, prompt_files_of
    from misbench.prompts import prompts_dir

    names = sorted(path.name for path in prompts_dir().glob("*.txt"))
    rendering = [stage.name for stage in STAGES if stage.prompts]
    of = {stage: set(prompt_files_of(stage, names)) for stage in rendering}
    assert "eval_rtd_compare.txt" in of["evaluate"] and "eval_rtd_compare.txt" not in of["generate"]
    assert "judge_entailment.txt" in of["generate"] & of["quality"]
    # quality reads the writing prompts (a kept text may not repeat them), not the description prompt
    assert "misinformation_semantic.txt" in of["generate"] & of["quality"]
    assert "semantic_description.txt" in of["generate"] and "semantic_description.txt" not in of["quality"]
    assert "misinformation_semantic.txt" not in of["evaluate"]
    assert "hoax_reword.txt" in of["hoax"] and "hoax_reword.txt" not in of["hoax-evaluate"]
    assert "hoax_judge.txt" in of["hoax-evaluate"] and "hoax_judge.txt" not in of["hoax"]
    assert all("system.txt" in files for files in of.values())
    assert set().union(*of.values()) == set(names)
    assert prompt_files_of("evaluate", ["my_judge.txt"]) == ["my_judge.txt"]


def test_the_paper_profile_sets_the_protocol_on_top_of_any_environment():
    """--profile paper: local Spark plus MisBench's protocol; a list keeps the environment
    of its first profile (databricks,paper); evaluate.prompts is checked by setting name."""
    from misbench.prompts import load_prompt

    paper = load_config("paper")
    local = load_config("local")
    assert paper.get("spark.master") == local.get("spark.master") and paper.get("lake.backend") == "delta_rs"
    assert paper.get("evaluate.runs") == 3 and paper.get("evaluate.answer_mode") == "generate"
    assert paper.get("evaluate.generate_sampling.max_tokens") == 512
    assert paper.get("evaluate.rtd.last_step") == "compare"
    assert len(paper.get("hoax.countries")) == 7 and local.get("hoax.countries") is None  # MultiHoax's seven
    on_databricks = load_config("databricks,paper")
    assert on_databricks.get("lake.backend") == load_config("databricks").get("lake.backend") != "delta_rs"
    assert on_databricks.get("evaluate.runs") == 3 and on_databricks.profile == "databricks,paper"
    for setting, name in paper.get("evaluate.prompts").items():
        prompt = load_prompt(name)
        assert "According to your own knowledge" in prompt.user, setting
        assert "{options}" in prompt.user and "{question}" in prompt.user
    assert load_config("local").get("evaluate.runs") == 1  # the defaults stay
    with pytest.raises(ConfigError, match="unknown profile 'nowhere'"):
        load_config("local,nowhere")


@pytest.mark.parametrize("profile", ["local", "databricks", "cluster", "paper", "databricks,paper", "cluster,paper"])
def test_every_shipped_profile_names_only_settings_of_base_yaml(profile):
    load_config(profile)  # raises on a key base.yaml does not name or a value of another type


@pytest.mark.parametrize("overrides, message", [
    (["claims.no_such_setting=1"], r"unknown setting 'claims\.no_such_setting'$"),
    (["generate.taks=4"], r"unknown setting 'generate\.taks' \(did you mean 'generate\.tasks'\?\)"),
    (["no_such_section.deeper.key=1"], r"unknown setting 'no_such_section\.deeper\.key'"),
    # a setting of an earlier misbench is named with its new place
    (["evaluate.yes_option=Ja"], r"unknown setting 'evaluate\.yes_option' \(moved to 'llm\.answer_words\.yes_word'\)"),
    (["generate.tasks=abc"], r"setting 'generate\.tasks' is 'abc'; expected a whole number"),
    (["generate.tasks=2.5"], r"setting 'generate\.tasks' is 2\.5; expected a whole number"),
    (["hoax.reword.enabled=maybe"], r"setting 'hoax\.reword\.enabled' is 'maybe'; expected true or false"),
    (["ingest.languages=en"], r"setting 'ingest\.languages' is 'en'; expected a list"),
    (["generate=3"], r"setting 'generate' is 3; expected a section of settings"),
    (["generate.tasks=2.0"], r"setting 'generate\.tasks' is 2\.0; expected a whole number"),
    (["ingest.languages=[en, no]"],  # YAML reads Norwegian's code as false
     r"setting 'ingest\.languages\.1' is false; expected a text \(YAML reads yes, no, on and off as true"),
    (["ingest.languages=[en"], r"override value '\[en' is not valid YAML"),
    # a null default says nothing of the type: NULL_DEFAULT_TYPES does
    (["evaluate.limit=abc"], r"setting 'evaluate\.limit' is 'abc'; expected a whole number or null"),
    (["hoax.countries=Q148"], r"setting 'hoax\.countries' is 'Q148'; expected a list or null"),
    (["hoax.countries=[Q148, no]"], r"setting 'hoax\.countries\.1' is false; expected a text"),
    (["llm.llama_cpp.extra_buffer_types="], r"'llm\.llama_cpp\.extra_buffer_types' is null; expected a text or true"),
    # a section set whole keeps every key
    (["generate.sampling={temperature: 1}"],
     r"section 'generate\.sampling' lacks max_tokens, min_tokens, seed, top_p"),
    # a judge's LLM section overrides the llm section's own keys, no others
    (["quality.entailment.llm_judge.llm.llama_cpp.modle=x"],
     r"unknown setting 'quality\.entailment\.llm_judge\.llm\.llama_cpp\.modle' \(did you mean"),
    (["hoax.evaluate.judge.llm.llama_cpp.n_ctx=big"], r"'hoax\.evaluate\.judge\.llm\.llama_cpp\.n_ctx' is 'big'"),
])
def test_unknown_settings_and_wrong_types_are_refused_by_their_full_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("local", overrides)


def test_what_the_schema_lets_through():
    cfg = load_config("local", [
        "ingest.split_mb=0.5", "generate.gpus_per_task=0.5", "llm.fake.seconds_per_request=0.05",  # quantities
        "llm.llama_cpp.extra_buffer_types=false",  # "auto", true or false
        "claims.reference_date=2025-01-01",  # a date stays the text it was
        "llm.fake.replies={'a prompt': 'a reply'}", "spark.conf.spark.any.setting=1",  # sections of names
        "evaluate.limit=5", "hoax.countries=[France]", "spark.master=null",  # null and their own type
        "quality.similarity.model_package=null",  # a package, or null for a model folder
        "llm.answer_words.yes_word=Yes", "lake.root=2026",  # a text as written where YAML reads true, a number
        "quality.entailment.llm_judge.llm={backend: fake}",  # a judge's LLM: any subset of llm's keys
        "llm.fake.replies.a question=Yes", "claims.enrich.user_agent=misbench #2: tests",  # texts as written
        "quality.human_eval.entails_at=2.5",  # a median of ratings
    ])
    assert cfg.get("llm.fake.replies") == {"a prompt": "a reply", "a question": "Yes"}
    assert cfg.get("claims.enrich.user_agent") == "misbench #2: tests"
    assert cfg.get("claims.reference_date") == "2025-01-01" and cfg.get("ingest.split_mb") == 0.5
    assert cfg.get("llm.answer_words.yes_word") == "Yes" and cfg.get("lake.root") == "2026"


def test_a_profile_file_is_checked_alone_in_a_list_and_through_extends(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("generate:\n  taks: 4\n")
    with pytest.raises(ConfigError, match=r"profile mine: unknown setting 'generate\.taks'"):
        load_config(str(own))
    with pytest.raises(ConfigError, match=r"profile databricks,mine: unknown setting 'generate\.taks'"):
        load_config(f"databricks,{own}")
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {own.with_suffix('')}\nevaluate:\n  limit: 3\n")
    with pytest.raises(ConfigError, match=r"profile mine,child: unknown setting 'generate\.taks'"):
        load_config(str(child))
    typed = tmp_path / "typed.yaml"
    typed.write_text("generate:\n  tasks: two\nclaims:\n  reference_date: 2025-01-01\n")
    with pytest.raises(ConfigError, match=r"profile typed: setting 'generate\.tasks' is 'two'; expected a whole number"):
        load_config(str(typed))
    typed.write_text("claims:\n  reference_date: 2025-01-01\n")  # a date as written, as with --set
    assert load_config(str(typed)).get("claims.reference_date") == "2025-01-01"


def test_the_command_refuses_an_unknown_setting_before_any_work(tmp_path, capsys):
    from misbench.cli import main

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "claims", "--set", "claims.no_such_setting=1"]) == 2
    assert "unknown setting 'claims.no_such_setting'" in capsys.readouterr().err
    assert not lake.exists()  # no Spark session, no log folder, no table
