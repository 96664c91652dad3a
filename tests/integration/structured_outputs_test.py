#!/usr/bin/env python3
"""Structured outputs and tool calling against the real loomd, through the
official `openai` SDK (and grpcio for the gRPC constraint oneof):

- response_format json_object and json_schema (strict; the SDK's pydantic
  `parse` too): the content parses, validates with `jsonschema` and ends with
  finish_reason "stop", not "length";
- vLLM's structured_outputs: regex outputs full-match, a choice is one of the
  choices, grammar outputs parse;
- tools with tool_choice auto (a few-shot conversation the model follows),
  required and a named function, whole and streamed: the calls' arguments are
  JSON that validates against the function's parameters, finish_reason
  "tool_calls", the streamed deltas add up to the whole answer;
- invalid schemas, regexes and grammars get 400 naming the field and the
  problem.

loomd runs with the Hermes-style tools template fixture (--chat_template),
since the default model's own template has no tools section.

With --corpus DIR, every schema of the corpus (tests/constraint/schemas)
runs end to end instead, 16 requests at a time: each output validates and
ends with "stop".
"""
import argparse
import ast
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

import grpc
import jsonschema
import openai
import pydantic
from grpc_tools import protoc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_proc import LoomdProcess  # noqa: E402

ARGS = None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(REPO, "tests", "fixtures", "chat_templates", "hermes_tools.jinja")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "city": {"type": "string", "enum": ["Paris", "Berlin", "Rome"]},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 32},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
CLOCK = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "PST"]}},
            "required": ["zone"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, CLOCK]
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def few_shot(question):
    """A conversation in which the assistant answered with calls three times,
    so that greedy decoding calls get_weather for the fourth city."""
    messages = []
    for i, city in enumerate(["Berlin", "Rome", "Madrid"]):
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "get_weather",
                             "arguments": json.dumps({"city": city, "unit": "celsius"})}}
        messages += [{"role": "user", "content": f"What is the weather in {city}?"},
                     {"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"call_{i}", "content": "sunny, 21"},
                     {"role": "assistant", "content": f"It is sunny in {city}."}]
    return messages + [{"role": "user", "content": question}]


class Person(pydantic.BaseModel):
    name: str
    age: int
    city: str


def engine_matches(kind, constraint, text):
    """Whether `text` is a complete output of the constraint, as the engine's
    own automaton decides (the constraint_match helper)."""
    paths = []
    for name, data in (("constraint", constraint), ("text", text)):
        path = os.path.join(TMP.name, name)
        with open(path, "w") as f:
            f.write(data)
        paths.append(path)
    result = subprocess.run([ARGS.constraint_match, kind] + paths, capture_output=True, text=True)
    if result.returncode == 2:
        raise RuntimeError(f"constraint_match failed: {result.stderr}")
    return result.returncode == 0


def generate_stubs(out_dir):
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    proto_dir = os.path.join(REPO, "proto")
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
                      f"--grpc_python_out={out_dir}",
                      os.path.join(proto_dir, "loom/v1/generation.proto")])
    if rc != 0:
        raise RuntimeError(f"grpc_tools.protoc failed with {rc}")
    sys.path.insert(0, out_dir)
    return (importlib.import_module("loom.v1.generation_pb2"),
            importlib.import_module("loom.v1.generation_pb2_grpc"))


LOOMD = None  # one loomd for every test, with the tools template
TMP = None


def setUpModule():
    global LOOMD, TMP
    TMP = tempfile.TemporaryDirectory()
    LOOMD = LoomdProcess(ARGS.loomd, [
        "--threads=2", "--max_model_len=2048", "--kv_cache_bytes=536870912",
        f"--chat_template={TEMPLATE}"], TMP.name)
    LOOMD.start()


def tearDownModule():
    code = LOOMD.stop()
    log = LOOMD.log()
    TMP.cleanup()
    if code != 0:
        raise AssertionError(f"loomd exited with {code}:\n{log[-4000:]}")


class LoomdTestCase(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.loomd = LOOMD
        cls.client = openai.OpenAI(base_url=LOOMD.http + "/v1", api_key="unused",
                                   max_retries=0, timeout=300)
        cls.model = cls.client.models.list().data[0].id

    def chat(self, messages, **kwargs):
        return self.client.chat.completions.create(model=self.model, messages=messages,
                                                   temperature=0, **kwargs)

    def ask(self, question, **kwargs):
        return self.chat([{"role": "user", "content": question}], **kwargs)

    def assert_stopped(self, choice):
        self.assertEqual(choice.finish_reason, "stop", choice)


class ResponseFormatTest(LoomdTestCase):

    def test_json_object(self):
        response = self.ask("Describe Paris as a JSON object.", max_tokens=400,
                            response_format={"type": "json_object"})
        choice = response.choices[0]
        self.assert_stopped(choice)
        self.assertIsInstance(json.loads(choice.message.content), dict)

    def test_json_schema_strict(self):
        response = self.ask(
            "Invent a person who lives in a European capital.", max_tokens=200,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "strict": True, "schema": PERSON}})
        choice = response.choices[0]
        self.assert_stopped(choice)
        person = json.loads(choice.message.content)
        jsonschema.validate(person, PERSON)
        # Properties come in the schema's order.
        self.assertEqual(list(person), ["name", "age", "city"])

    def test_sdk_parse_with_a_pydantic_model(self):
        completion = self.client.chat.completions.parse(
            model=self.model, temperature=0, max_tokens=200, response_format=Person,
            messages=[{"role": "user", "content": "Invent a person."}])
        choice = completion.choices[0]
        self.assert_stopped(choice)
        self.assertIsInstance(choice.message.parsed, Person)

    def test_json_schema_on_completions_and_n_samples(self):
        response = self.client.completions.create(
            model=self.model, prompt="A person as JSON:", max_tokens=200, temperature=1.0,
            seed=7, n=3,
            extra_body={"response_format": {"type": "json_schema",
                                            "json_schema": {"name": "p", "schema": PERSON}}})
        self.assertEqual(len(response.choices), 3)
        for choice in response.choices:
            self.assert_stopped(choice)
            jsonschema.validate(json.loads(choice.text), PERSON)

    def test_json_schema_streamed(self):
        chunks = list(self.ask(
            "Invent a person.", max_tokens=200, stream=True,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": PERSON}}))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        jsonschema.validate(json.loads(text), PERSON)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "stop")


class StructuredOutputsTest(LoomdTestCase):

    def test_regex_full_matches(self):
        pattern = r"\+33 [1-9]( [0-9]{2}){4}"
        response = self.client.completions.create(
            model=self.model, prompt="A French phone number:", max_tokens=40, temperature=0,
            extra_body={"structured_outputs": {"regex": pattern}})
        choice = response.choices[0]
        self.assert_stopped(choice)
        self.assertTrue(re.fullmatch(pattern, choice.text), choice.text)
        self.assertTrue(engine_matches("regex", pattern, choice.text), choice.text)

    def test_choice(self):
        choices = ["positive", "negative", "neutral"]
        response = self.ask("Sentiment of: I love this city!", max_tokens=10,
                            extra_body={"structured_outputs": {"choice": choices}})
        self.assert_stopped(response.choices[0])
        self.assertIn(response.choices[0].message.content, choices)

    def test_grammar_outputs_parse(self):
        grammar = "\n".join([
            'root ::= expr',
            'expr ::= term (" " [-+*] " " term)*',
            'term ::= [1-9] [0-9]? | "(" expr ")"',
        ])
        response = self.ask("Write an arithmetic expression.", max_tokens=60,
                            extra_body={"structured_outputs": {"grammar": grammar}})
        choice = response.choices[0]
        self.assert_stopped(choice)
        self.assertTrue(engine_matches("grammar", grammar, choice.message.content),
                        choice.message.content)
        # And, independently of the engine, it is an arithmetic expression.
        tree = ast.parse(choice.message.content, mode="eval")
        self.assertIsInstance(tree.body, (ast.BinOp, ast.Constant))

    def test_the_engine_check_refuses_text_outside_the_grammar(self):
        # The check of test_grammar_outputs_parse can fail.
        grammar = 'root ::= "(" [0-9]+ ")"'
        self.assertTrue(engine_matches("grammar", grammar, "(42)"))
        self.assertFalse(engine_matches("grammar", grammar, "(42"))
        self.assertFalse(engine_matches("grammar", grammar, "(4a)"))

    def test_json_object_in_structured_outputs(self):
        response = self.ask("JSON please.", max_tokens=300,
                            extra_body={"structured_outputs": {"json_object": True}})
        self.assert_stopped(response.choices[0])
        self.assertIsInstance(json.loads(response.choices[0].message.content), dict)


class ToolsTest(LoomdTestCase):

    def assert_valid_calls(self, message, names):
        self.assertTrue(message.tool_calls, message)
        for call in message.tool_calls:
            self.assertEqual(call.type, "function")
            self.assertTrue(call.id.startswith("call_"), call.id)
            self.assertIn(call.function.name, names)
            jsonschema.validate(json.loads(call.function.arguments),
                                PARAMETERS[call.function.name])
        self.assertEqual(len({c.id for c in message.tool_calls}), len(message.tool_calls))

    def streamed(self, messages, **kwargs):
        """The raw chunks of a streamed answer and the SDK's accumulation of them."""
        with self.client.chat.completions.stream(model=self.model, messages=messages,
                                                 temperature=0, **kwargs) as stream:
            chunks = [event.chunk for event in stream if event.type == "chunk"]
            final = stream.get_final_completion()
        first_deltas = [c.choices[0].delta.tool_calls[0] for c in chunks
                        if c.choices and c.choices[0].delta.tool_calls
                        and c.choices[0].delta.tool_calls[0].id]
        for delta in first_deltas:  # a call's first delta names it, as OpenAI's do
            self.assertEqual(delta.type, "function")
            self.assertTrue(delta.function.name)
        return chunks, final

    # The few-shot tests (auto, none) share their prompt, tools included, so
    # that all but the first reuse its prefix-cached blocks.
    def test_auto_calls_when_the_model_writes_a_call(self):
        messages = few_shot("What is the weather in Paris?")
        whole = self.chat(messages, tools=TOOLS, tool_choice="auto", max_tokens=80)
        choice = whole.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertIsNone(choice.message.content)
        self.assert_valid_calls(choice.message, {"get_weather"})
        self.assertEqual(json.loads(choice.message.tool_calls[0].function.arguments)["city"],
                         "Paris")
        chunks, final = self.streamed(messages, tools=TOOLS, max_tokens=80)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "tool_calls")
        streamed = final.choices[0].message.tool_calls
        self.assertEqual([(c.function.name, c.function.arguments) for c in streamed],
                         [(c.function.name, c.function.arguments)
                          for c in choice.message.tool_calls])

    def test_auto_answers_in_text_when_the_model_does(self):
        response = self.ask("Say hello.", tools=TOOLS, max_tokens=20)
        self.assertFalse(response.choices[0].message.tool_calls)
        self.assertTrue(response.choices[0].message.content)

    def test_none_leaves_the_text_alone(self):
        messages = few_shot("What is the weather in Paris?")
        response = self.chat(messages, tools=TOOLS, tool_choice="none", max_tokens=80)
        message = response.choices[0].message
        self.assertFalse(message.tool_calls)
        self.assertIn("<tool_call>", message.content)

    def test_required_guarantees_a_valid_call(self):
        # A question the model would answer in text.
        response = self.ask("Say hello.", tools=TOOLS, tool_choice="required", max_tokens=200)
        choice = response.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assert_valid_calls(choice.message, {"get_weather", "get_time"})

    def test_required_streamed(self):
        chunks, final = self.streamed([{"role": "user", "content": "Weather in Rome?"}],
                                      tools=TOOLS, tool_choice="required", max_tokens=200)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "tool_calls")
        self.assert_valid_calls(final.choices[0].message, {"get_weather", "get_time"})

    def test_named_function_whole_and_streamed(self):
        named = {"type": "function", "function": {"name": "get_time"}}
        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        whole = self.chat(messages, tools=TOOLS, tool_choice=named, max_tokens=100)
        choice = whole.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assert_valid_calls(choice.message, {"get_time"})
        self.assertEqual(len(choice.message.tool_calls), 1)
        chunks, final = self.streamed(messages, tools=TOOLS, tool_choice=named, max_tokens=100)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "tool_calls")
        self.assertEqual(
            [(c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls],
            [(c.function.name, c.function.arguments) for c in choice.message.tool_calls])

    def test_a_conversation_continues_after_the_tool_result(self):
        # The prompt of test_named_function_whole_and_streamed: tool_choice
        # is not rendered, so the two share cached blocks.
        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        named = {"type": "function", "function": {"name": "get_weather"}}
        first = self.chat(messages, tools=TOOLS, tool_choice=named, max_tokens=100)
        call = first.choices[0].message.tool_calls[0]
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "rainy, 12"}]
        second = self.chat(messages, tools=TOOLS, tool_choice="none", max_tokens=30)
        self.assertTrue(second.choices[0].message.content)


class ErrorsTest(LoomdTestCase):

    def bad_request(self, **kwargs):
        with self.assertRaises(openai.BadRequestError) as caught:
            self.ask("x", max_tokens=5, **kwargs)
        return caught.exception.body

    def test_invalid_schema_regex_and_grammar_name_the_problem(self):
        body = self.bad_request(response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object",
                                    "properties": {"a": {"type": "strin"}}}}})
        self.assertEqual(body["param"], "response_format")
        self.assertIn("response_format.json_schema.schema: at /properties/a", body["message"])
        body = self.bad_request(extra_body={"structured_outputs": {"regex": "(ab"}})
        self.assertEqual(body["param"], "structured_outputs")
        self.assertIn("structured_outputs.regex: at offset", body["message"])
        body = self.bad_request(extra_body={"structured_outputs": {"grammar": "root ::= foo"}})
        self.assertEqual(body["param"], "structured_outputs")
        self.assertRegex(body["message"], r"structured_outputs\.grammar: line 1 col \d+")
        body = self.bad_request(tools=[{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}],
            tool_choice="required")
        self.assertEqual(body["param"], "tools")
        self.assertIn("tools[0].function.parameters: at /properties/a", body["message"])

    def test_shapes_and_limits(self):
        body = self.bad_request(response_format={"type": "xml"})
        self.assertEqual(body["param"], "response_format")
        body = self.bad_request(tools=TOOLS, tool_choice={"type": "function",
                                                              "function": {"name": "nope"}})
        self.assertEqual(body["param"], "tool_choice")
        body = self.bad_request(extra_body={"structured_outputs": {"regex": "a" * 300000}})
        self.assertIn("at most 262144 bytes", body["message"])


class GrpcConstraintTest(LoomdTestCase):
    """The gRPC API's constraint oneof and tools give the same guarantees."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pb, grpc_pb = generate_stubs(TMP.name)
        cls.channel = grpc.insecure_channel(cls.loomd.grpc_target)
        cls.stub = grpc_pb.GenerationServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def generate(self, **fields):
        request = self.pb.GenerateRequest(
            sampling=self.pb.SamplingParams(temperature=0),
            stopping=self.pb.StoppingCriteria(max_tokens=200), **fields)
        return self.stub.Generate(request, timeout=300).completions[0]

    def test_json_schema_and_choice(self):
        completion = self.generate(prompt="A person as JSON:", json_schema=json.dumps(PERSON))
        self.assertEqual(completion.finish_reason, self.pb.FINISH_REASON_STOP)
        jsonschema.validate(json.loads(completion.text), PERSON)
        completion = self.generate(prompt="Yes or no?", choice=self.pb.Choices(choices=["yes", "no"]))
        self.assertIn(completion.text, ["yes", "no"])

    def test_named_tool_gives_a_hermes_call(self):
        messages = self.pb.ChatMessages(
            messages=[self.pb.ChatMessage(role="user", content="Weather in Rome?")],
            tools=[self.pb.Tool(name="get_weather", parameters=json.dumps(PARAMETERS["get_weather"]))],
            tool_choice=self.pb.TOOL_CHOICE_FUNCTION, tool_choice_function="get_weather")
        completion = self.generate(messages=messages)
        match = re.fullmatch(r"<tool_call>\n(.*)\n</tool_call>", completion.text, re.DOTALL)
        self.assertTrue(match, completion.text)
        call = json.loads(match.group(1))
        self.assertEqual(call["name"], "get_weather")
        jsonschema.validate(call["arguments"], PARAMETERS["get_weather"])

    def test_invalid_regex(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.generate(prompt="x", regex="(ab")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("regex: at offset", caught.exception.details())


class CorpusTest(LoomdTestCase):
    """--corpus: every schema of the corpus, end to end, 16 requests at a
    time so that loomd batches them."""

    def test_every_schema(self):
        names = sorted(n for n in os.listdir(ARGS.corpus) if n.endswith(".json"))
        self.assertGreaterEqual(len(names), 50)
        corpus = {}
        for name in names:
            with open(os.path.join(ARGS.corpus, name)) as f:
                corpus[name] = json.load(f)
        schemas = {name: entry["schema"] for name, entry in corpus.items()}

        # Greedy, the small default model repeats itself (array items,
        # string contents) until max_tokens; an example document and
        # repetition penalties let it end the document where a model of its
        # size would, and the constraint alone decides what is valid.
        def ask(name):
            return self.ask(
                "Here is a JSON document: " + json.dumps(corpus[name]["valid"][0])
                + "\nWrite another short document of the same kind.",
                max_tokens=600, frequency_penalty=1.0, presence_penalty=1.0,
                response_format={"type": "json_schema", "json_schema": {
                    "name": "doc", "strict": True, "schema": schemas[name]}})

        with ThreadPoolExecutor(max_workers=16) as pool:
            responses = dict(zip(names, pool.map(ask, names)))
        for name in names:
            with self.subTest(schema=name):
                choice = responses[name].choices[0]
                self.assert_stopped(choice)
                jsonschema.validate(json.loads(choice.message.content), schemas[name])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--constraint_match", required=True,
                        help="the constraint_match helper (tests/constraint)")
    parser.add_argument("--corpus", help="a folder of JSON schemas: run CorpusTest alone")
    ARGS, rest = parser.parse_known_args()
    if ARGS.corpus:
        rest = rest or ["CorpusTest"]
    else:
        del CorpusTest
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
