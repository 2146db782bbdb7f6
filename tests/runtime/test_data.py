"""Prompt files: every format, the prompt and answer columns, chat templates, the length limit, a seeded order,
and a clear error for each way a data file can be wrong."""

import builtins
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime.data import DataError, PromptSampler, load_prompts, load_tokenizer, read_records  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tok")
    quickstart.build_tokenizer(str(directory))
    return load_tokenizer(str(directory))


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_character_tokenizer_round_trips_and_pads_left(tokenizer):
    ids = tokenizer("3+4=")["input_ids"]
    assert len(ids) == 4
    assert tokenizer.decode(ids) == "3+4="
    assert tokenizer.padding_side == "left"


@pytest.mark.parametrize("name,text", [
    ("d.jsonl", '{"prompt": "1+2=", "answer": "3"}\n\n{"prompt": "2+2=", "answer": 4}\n'),
    ("d.json", '[{"prompt": "1+2=", "answer": "3"}, {"prompt": "2+2=", "answer": 4}]'),
    ("d.json", '{"prompt": ["1+2=", "2+2="], "answer": ["3", "4"]}'),
    ("d.csv", "prompt,answer\n1+2=,3\n2+2=,4\n"),
])
def test_formats(tmp_path, tokenizer, name, text):
    data = load_prompts([write(tmp_path / name, text)], tokenizer, answer_key="answer", apply_chat_template=False)
    assert data.texts == ("1+2=", "2+2=")
    assert data.answers == ("3", "4")


def test_parquet(tmp_path, tokenizer):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"question": ["1+2="], "answer": ["3"]}), str(path))
    data = load_prompts([str(path)], tokenizer, prompt_key="question", answer_key="answer", apply_chat_template=False)
    assert data.texts == ("1+2=",)


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError("no pyarrow")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(DataError, match="pip install pyarrow"):
        read_records(str(path))


def test_nested_answer_key(tmp_path, tokenizer):
    path = write(tmp_path / "d.jsonl", json.dumps({"prompt": "1+2=", "reward_model": {"ground_truth": "3"}}) + "\n")
    data = load_prompts([path], tokenizer, answer_key="reward_model.ground_truth", apply_chat_template=False)
    assert data.answers == ("3",)


def test_chat_messages_go_through_the_chat_template(tmp_path, tokenizer):
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}={% endfor %}"
    try:
        path = write(tmp_path / "d.jsonl", json.dumps({"prompt": [{"role": "user", "content": "1+2"}]}) + "\n"
                     + json.dumps({"prompt": "2+2"}) + "\n")
        data = load_prompts([path], tokenizer)
        assert data.texts == ("1+2=", "2+2=")  # a plain string becomes one user message
    finally:
        tokenizer.chat_template = None


def test_the_chat_template_is_rendered_with_the_configs_arguments(tmp_path, tokenizer):
    # SkyRL's generator.chat_template_kwargs, e.g. Qwen3's enable_thinking: false
    tokenizer.chat_template = ("{% for m in messages %}{{ m['content'] }}={% endfor %}"
                               "{% if enable_thinking is defined and not enable_thinking %}!{% endif %}")
    try:
        path = write(tmp_path / "d.jsonl", json.dumps({"prompt": "1+2"}) + "\n")
        assert load_prompts([path], tokenizer).texts == ("1+2=",)
        assert load_prompts([path], tokenizer, template_kwargs=(("enable_thinking", False),)).texts == ("1+2=!",)
    finally:
        tokenizer.chat_template = None


def test_chat_messages_without_a_template_are_an_error(tmp_path, tokenizer):
    path = write(tmp_path / "d.jsonl", json.dumps({"prompt": [{"role": "user", "content": "1+2"}]}) + "\n")
    with pytest.raises(DataError, match="no chat template"):
        load_prompts([path], tokenizer)


def test_prompts_over_the_length_limit_are_left_out(tmp_path, tokenizer):
    path = write(tmp_path / "d.jsonl", '{"prompt": "1+2="}\n{"prompt": "11+22="}\n')
    data = load_prompts([path], tokenizer, max_prompt_length=4, apply_chat_template=False)
    assert data.texts == ("1+2=",) and data.dropped == 1
    with pytest.raises(DataError, match="raise the limit"):
        load_prompts([path], tokenizer, max_prompt_length=2, apply_chat_template=False)


def test_a_limit_on_the_prompts_own_text_ignores_the_chat_template(tmp_path, tokenizer):
    """AReaL's RL loaders drop a prompt by the tokens of its text and suffix before the chat template."""
    tokenizer.chat_template = "{% for m in messages %}[{{ m['content'] }}]{% endfor %}"
    try:
        path = write(tmp_path / "d.jsonl", '{"prompt": "1+2"}\n{"prompt": "11+22"}\n')
        # "1+2" + "=" is 4 characters, rendered "[1+2=]" 6; "11+22=" is 6, rendered 8
        rendered = load_prompts([path], tokenizer, max_prompt_length=6, suffix="=")
        assert rendered.texts == ("[1+2=]",) and rendered.dropped == 1
        message = load_prompts([path], tokenizer, max_prompt_length=6, suffix="=", length_of="message")
        assert message.texts == ("[1+2=]", "[11+22=]") and message.dropped == 0
        assert load_prompts([path], tokenizer, max_prompt_length=5, suffix="=", length_of="message").dropped == 1
    finally:
        tokenizer.chat_template = None


def test_prompts_written_for_another_template_are_stripped_and_measured_as_written(tmp_path, tokenizer):
    """AReaL's boba script: `<think>` and the role markers leave the prompt before its chat template; the prompt as
    written is what must fit the limit; each row's answer is a list of solutions."""
    path = write(tmp_path / "d.jsonl", json.dumps({"prompt": "<a>1+2<b>", "solutions": ["3", "03"]}) + "\n"
                 + json.dumps({"prompt": "<a>11+22<b>", "solutions": ["33"]}) + "\n")
    data = load_prompts([path], tokenizer, answer_key="solutions", apply_chat_template=False, max_prompt_length=9,
                        length_of="source", removals=("<a>", "<b>"), answer_list=True)
    assert data.texts == ("1+2",) and data.dropped == 1  # "<a>11+22<b>" is 11 characters as written
    assert data.answers == (("3", "03"),)
    with pytest.raises(DataError, match="not a list of answers"):
        load_prompts([write(tmp_path / "e.jsonl", '{"prompt": "1+2", "solutions": "3"}\n')], tokenizer,
                     answer_key="solutions", apply_chat_template=False, answer_list=True)


def test_prompts_over_the_length_limit_keep_their_head_when_truncating(tmp_path, tokenizer):
    """RLinf without filter_prompt_by_length: a long prompt is cut to its first max_prompt_length tokens."""
    path = write(tmp_path / "d.jsonl", '{"prompt": "1+2="}\n{"prompt": "11+22="}\n')
    data = load_prompts([path], tokenizer, max_prompt_length=4, apply_chat_template=False, long_prompts="truncate")
    assert data.dropped == 0 and data.cut == 1
    assert data.token_ids[1] == tuple(tokenizer("11+2", add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("name,text,message", [
    ("missing.jsonl", None, "data file not found"),
    ("d.jsonl", '{"prompt": "1+2="}\n{"prompt": \n', r"d\.jsonl:2: not valid JSON"),
    ("d.jsonl", '["1+2="]\n', "must be a JSON object"),
    ("d.jsonl", '{"question": "1+2="}\n', r"no `prompt` column .* question"),
    ("d.jsonl", '{"prompt": ""}\n', "is empty"),
    ("d.jsonl", '{"prompt": [{"role": "user"}]}\n', "string `role` and `content`"),
    ("d.json", '{"prompt": "1+2="', "not valid JSON"),
    ("d.json", '[1, 2]', "list of JSON objects"),
    ("d.csv", "prompt\n1+2=,extra\n", "more fields than the header"),
    ("d.jsonl", "", "holds no records"),
    ("d.txt", "1+2=", "unsupported data file type `.txt`"),
])
def test_bad_files_are_clear_errors(tmp_path, tokenizer, name, text, message):
    path = str(tmp_path / name) if text is None else write(tmp_path / name, text)
    with pytest.raises(DataError, match=message):
        load_prompts([path], tokenizer, apply_chat_template=False)


def test_missing_answer_is_an_error(tmp_path, tokenizer):
    path = write(tmp_path / "d.jsonl", '{"prompt": "1+2="}\n')
    with pytest.raises(DataError, match="no `answer` value"):
        load_prompts([path], tokenizer, answer_key="answer", apply_chat_template=False)


def test_an_answer_of_several_columns_is_their_record(tmp_path, tokenizer):
    path = write(tmp_path / "d.jsonl", '{"query": "3 8 -> 24", "target": 24, "numbers": [3, 8], "other": 1}\n')
    prompts = load_prompts([path], tokenizer, prompt_key="query", answer_key="target", apply_chat_template=False,
                           answer_fields=("target", "numbers"))
    assert json.loads(prompts.answers[0]) == {"target": 24, "numbers": [3, 8]}
    missing = write(tmp_path / "e.jsonl", '{"query": "3 8 -> 24", "target": 24}\n')
    with pytest.raises(DataError, match="no `numbers` value .*`target`, `numbers`"):
        load_prompts([missing], tokenizer, prompt_key="query", apply_chat_template=False,
                     answer_fields=("target", "numbers"))


def test_sampler_order_is_seeded_and_resumable():
    a = PromptSampler(10, 3, seed=7)
    first = [a.next() for _ in range(7)]  # crosses epochs: 3 batches per epoch, the tail of 1 skipped
    assert len({tuple(b) for b in first[:3]}) == 3 and len(set(sum(first[:3], []))) == 9
    b = PromptSampler(10, 3, seed=7)
    for _ in range(4):
        b.next()
    state = b.state_dict()
    c = PromptSampler(10, 3, seed=7)
    c.load_state_dict(json.loads(json.dumps(state)))
    assert [c.next() for _ in range(3)] == first[4:]
    assert PromptSampler(10, 3, seed=8).next() != first[0]
    assert PromptSampler(10, 3, seed=7, shuffle=False).next() == [0, 1, 2]


def test_sampler_refuses_a_changed_dataset():
    state = PromptSampler(10, 3, seed=7).state_dict()
    with pytest.raises(DataError, match="same order"):
        PromptSampler(11, 3, seed=7).load_state_dict(state)
    with pytest.raises(DataError, match="needs 4 prompts"):
        PromptSampler(3, 4, seed=7)


def test_a_prompt_suffix_ends_the_text_or_the_last_message(tmp_path, tokenizer):
    # AReaL's GSM8K loader asks each question for a boxed answer (Data.prompt_suffix)
    text = write(tmp_path / "t.jsonl", json.dumps({"prompt": "1+2"}) + "\n")
    chat = write(tmp_path / "c.jsonl", json.dumps({"prompt": [{"role": "system", "content": "be brief"},
                                                              {"role": "user", "content": "1+2"}]}) + "\n")
    assert load_prompts([text], tokenizer, apply_chat_template=False, suffix=" Box it.").texts == ("1+2 Box it.",)
    assert load_prompts([chat], tokenizer, apply_chat_template=False, suffix=" Box it.").texts == \
        ("be brief\n1+2 Box it.",)
