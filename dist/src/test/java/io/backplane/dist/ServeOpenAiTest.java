package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.testkit.ModelEnvironment;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The OpenAI-compatible frontend through the real server, driven by OpenAI's own Python client
 * ({@code openai}, from the package index, in the model environment of tools/model-env.sh; the
 * test skips, naming the script, without it). The models are Triton python_backend models written
 * to Triton's LLM convention, run by the python backend: {@code mock_llm} as vLLM's backend
 * declares its inputs ({@code [1]}, sampling parameters as JSON, token counts), echoing its prompt
 * one word per token, with a ChatML chat template in its folder; {@code mock_trt} as Triton's own
 * mock LLM and the TensorRT-LLM models declare theirs ({@code [1, 1]}); {@code embed}, an
 * embedding model. The server runs with an API key.
 */
@Timeout(300)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ServeOpenAiTest {
    private static final String KEY = "sk-backplane-test";

    /** A decoupled LLM to Triton's convention: echoes "echo: <prompt>", one word per token. */
    static final String MOCK_LLM_PY = """
            import json, time
            import numpy as np
            import triton_python_backend_utils as pb_utils

            PATIENCE_S = 60

            class TritonPythonModel:
                def initialize(self, args):
                    self.marks = json.loads(args["model_config"])["parameters"]["marks"]["string_value"]

                def note(self, what):
                    with open(self.marks, "a") as f:
                        f.write(what + "\\n")

                def scalar(self, r, name, default):
                    t = pb_utils.get_input_tensor_by_name(r, name)
                    return default if t is None else t.as_numpy().reshape(-1)[0]

                def execute(self, requests):
                    for r in requests:
                        self.run(r)
                    return None

                def run(self, r):
                    sender = r.get_response_sender()
                    prompt = self.scalar(r, "text_input", b"").decode("utf-8")
                    stream = bool(self.scalar(r, "stream", False))
                    params = json.loads(self.scalar(r, "sampling_parameters", b"{}") or "{}")
                    max_tokens = int(params.get("max_tokens", self.scalar(r, "max_tokens", 16)))
                    counts = bool(self.scalar(r, "return_num_output_tokens", False))
                    self.note("inputs " + ",".join(sorted(t.name() for t in r.inputs())))
                    def response(text, n):
                        out = [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
                        if counts:
                            out.append(pb_utils.Tensor("num_input_tokens", np.array([len(prompt.split())], dtype=np.uint32)))
                            out.append(pb_utils.Tensor("num_output_tokens", np.array([n], dtype=np.uint32)))
                        return pb_utils.InferenceResponse(out)
                    if "FOREVER" in prompt:
                        n = 0
                        deadline = time.monotonic() + PATIENCE_S
                        while not r.is_cancelled() and time.monotonic() < deadline:
                            sender.send(response(" t%d" % n, 1))
                            n += 1
                            time.sleep(0.005)
                        self.note(("cancelled " if r.is_cancelled() else "timeout ") + prompt + " after " + str(n))
                        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                        return
                    words = ("echo: " + prompt).split(" ")
                    tokens = [w if i == 0 else " " + w for i, w in enumerate(words)][:max_tokens]
                    if not stream:
                        sender.send(response("".join(tokens), len(tokens)), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                        return
                    for i, t in enumerate(tokens):
                        if "FAIL" in prompt and i == 2:
                            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("the model failed mid-stream")),
                                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                            return
                        sender.send(response(t, 1))
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            """;

    static final String EMBED_PY = """
            import numpy as np
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def execute(self, requests):
                    out = []
                    for r in requests:
                        texts = pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy().reshape(-1)
                        v = np.array([[len(t), 1.5, -2.0] for t in texts], dtype=np.float32)
                        out.append(pb_utils.InferenceResponse([pb_utils.Tensor("embedding", v)]))
                    return out
            """;

    static final String CHATML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\\n{{ m['content'] }}<|im_end|>\\n{% endfor %}"
            + "{% if add_generation_prompt %}<|im_start|>assistant\\n{% endif %}";

    /** The checks, one per argument, in OpenAI's client; each prints "ok <name> <detail>" or raises. */
    static final String CLIENT_PY = """
            import sys, json, time
            import openai
            from openai import OpenAI

            base, key, case = sys.argv[1], sys.argv[2], sys.argv[3]
            client = OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=60)

            def ok(detail):
                print("ok " + case + " " + json.dumps(detail), flush=True)

            if case == "models":
                ok(sorted(m.id for m in client.models.list()))
            elif case == "completion":
                c = client.completions.create(model="mock_llm", prompt="hello world", max_tokens=3)
                ok({"text": c.choices[0].text, "finish": c.choices[0].finish_reason, "usage": c.usage.model_dump()})
            elif case == "completion_stream":
                s = client.completions.create(model="mock_llm", prompt="one two three", max_tokens=50, stream=True,
                                              stream_options={"include_usage": True})
                text, usage, finish = "", None, None
                for chunk in s:
                    if chunk.choices:
                        text += chunk.choices[0].text
                        finish = chunk.choices[0].finish_reason or finish
                    if chunk.usage:
                        usage = chunk.usage.model_dump()
                ok({"text": text, "finish": finish, "usage": usage})
            elif case == "chat":
                c = client.chat.completions.create(model="mock_llm", max_tokens=100,
                        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}])
                ok({"content": c.choices[0].message.content, "role": c.choices[0].message.role, "usage": c.usage.model_dump()})
            elif case == "chat_stream":
                s = client.chat.completions.create(model="mock_llm", max_tokens=100, stream=True,
                        messages=[{"role": "user", "content": "stream me"}])
                roles, content = [], ""
                for chunk in s:
                    d = chunk.choices[0].delta
                    if d.role:
                        roles.append(d.role)
                    content += d.content or ""
                ok({"roles": roles, "content": content})
            elif case == "trt":
                c = client.completions.create(model="mock_trt", prompt="as triton does", max_tokens=10)
                ok({"text": c.choices[0].text})
            elif case == "embeddings":
                e = client.embeddings.create(model="embed", input=["a", "bbb"])
                f = client.embeddings.create(model="embed", input="cc", encoding_format="float")
                ok({"base64": [d.embedding for d in e.data], "float": f.data[0].embedding})
            elif case == "errors":
                seen = []
                try:
                    client.completions.create(model="no_such_model", prompt="x")
                except openai.NotFoundError as e:
                    seen.append("not_found")
                try:
                    OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
                except openai.AuthenticationError:
                    seen.append("auth")
                try:
                    client.chat.completions.create(model="mock_trt", messages=[{"role": "user", "content": "x"}])
                except openai.BadRequestError as e:
                    seen.append("no_template" if "chat template" in str(e) else str(e))
                try:
                    for chunk in client.completions.create(model="mock_llm", prompt="FAIL a b c", stream=True):
                        pass
                except openai.APIError as e:
                    seen.append("mid_stream" if "failed mid-stream" in str(e) else str(e))
                ok(seen)
            elif case == "disconnect":
                s = client.completions.create(model="mock_llm", prompt="FOREVER py", stream=True, max_tokens=100000)
                n = 0
                for chunk in s:
                    n += 1
                    if n == 3:
                        break
                s.close()
                ok(n)
            """;

    @TempDir
    static Path dir;
    ServeProcess server;
    Path python;
    String base;

    @BeforeAll
    void serve() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(ServeProcess.DIST.resolve("backends/python")), "the layout has no python backend");
        Path envDir = ModelEnvironment.directory();
        python = envDir.resolve("bin/python");
        Assumptions.assumeTrue(Files.isExecutable(python), "no model environment at " + envDir + "; run tools/model-env.sh to make it");
        Process p = new ProcessBuilder(python.toString(), "-c", "import openai, numpy").redirectErrorStream(true).start();
        Assumptions.assumeTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "the model environment has no openai package; run tools/model-env.sh");
        Path repo = dir.resolve("repo");
        model(repo, "mock_llm", MOCK_LLM_PY, true, """
                input [
                  { name: "text_input" data_type: TYPE_STRING dims: [1] },
                  { name: "stream" data_type: TYPE_BOOL dims: [1] optional: true },
                  { name: "sampling_parameters" data_type: TYPE_STRING dims: [1] optional: true },
                  { name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [1] optional: true },
                  { name: "return_num_input_tokens" data_type: TYPE_BOOL dims: [1] optional: true },
                  { name: "return_num_output_tokens" data_type: TYPE_BOOL dims: [1] optional: true }
                ]
                output [
                  { name: "text_output" data_type: TYPE_STRING dims: [-1] },
                  { name: "num_input_tokens" data_type: TYPE_UINT32 dims: [1] },
                  { name: "num_output_tokens" data_type: TYPE_UINT32 dims: [1] }
                ]
                """);
        Files.writeString(repo.resolve("mock_llm/tokenizer_config.json"), "{\"chat_template\": \"" + CHATML + "\"}");
        model(repo, "mock_trt", MOCK_LLM_PY, true, """
                input [
                  { name: "text_input" data_type: TYPE_STRING dims: [1, 1] },
                  { name: "stream" data_type: TYPE_BOOL dims: [1, 1] },
                  { name: "return_logprobs" data_type: TYPE_BOOL dims: [1, 1] optional: true }
                ]
                output [{ name: "text_output" data_type: TYPE_STRING dims: [1, -1] }]
                """);
        model(repo, "embed", EMBED_PY, false, """
                max_batch_size: 8
                input [{ name: "text_input" data_type: TYPE_STRING dims: [1] }]
                output [{ name: "embedding" data_type: TYPE_FP32 dims: [3] }]
                """);
        server = ServeProcess.in(dir, "serve").repository(repo).frontends("openai").loadModels("mock_llm", "mock_trt", "embed")
                .args("--builtin-warmup=false", "--exit-timeout-secs", "3", "--openai-api-key", KEY)
                .env("JAVA_OPTS", "-Xmx256m -Djava.io.tmpdir=" + Files.createDirectories(dir.resolve("tmp"))).start();
        server.awaitStarted(Duration.ofSeconds(240));
        base = "http://127.0.0.1:" + server.port("openai");
    }

    @AfterAll
    void stop() throws Exception {
        if (server == null) {
            return;
        }
        try (ServeProcess s = server) {
            if (!s.isAlive()) {
                return;
            }
            List<ProcessHandle> stubs = s.descendants();
            s.signal("TERM", false);
            assertEquals(0, s.awaitExit(), s.output());
            for (ProcessHandle stub : stubs) {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (stub.isAlive() && System.nanoTime() < end) {
                    Thread.sleep(20);
                }
                assertTrue(!stub.isAlive(), "stub " + stub.pid() + " left running");
            }
            assertEquals(List.of(), ServeProcess.shmFiles(s.pid()), "shared-memory files left");
        }
        assertTrue(marks().stream().noneMatch(m -> m.startsWith("timeout")), "a model waited for a cancellation that never came: " + marks());
    }

    @Test
    void models_listsEveryModel() throws Exception {
        assertEquals("[\"embed\", \"mock_llm\", \"mock_trt\"]", check("models"));
    }

    @Test
    void completion_countsUsageAsTheModelReportsIt_andSendsOnlyDeclaredInputs() throws Exception {
        assertEquals("{\"text\": \"echo: hello world\", \"finish\": \"length\", \"usage\": {\"completion_tokens\": 3, \"prompt_tokens\": 2, "
                + "\"total_tokens\": 5, \"completion_tokens_details\": null, \"prompt_tokens_details\": null}}", check("completion"));
        assertTrue(marks().contains("inputs exclude_input_in_output,return_num_input_tokens,return_num_output_tokens,sampling_parameters,stream,text_input"),
                marks().toString());
    }

    @Test
    void completion_streamed_joinsToTheWholeText_withUsageLast() throws Exception {
        String r = check("completion_stream");
        assertTrue(r.contains("\"text\": \"echo: one two three\"") && r.contains("\"finish\": \"stop\"") && r.contains("\"completion_tokens\": 4"), r);
    }

    @Test
    void chat_rendersTheModelsTemplate() throws Exception {
        String r = check("chat");
        assertTrue(r.contains("\"content\": \"echo: <|im_start|>system\\nbe brief<|im_end|>\\n<|im_start|>user\\nhi there<|im_end|>\\n<|im_start|>assistant\\n\""), r);
        assertTrue(r.contains("\"role\": \"assistant\""), r);
    }

    @Test
    void chat_streamed_firstChunkCarriesTheRole() throws Exception {
        String r = check("chat_stream");
        assertTrue(r.startsWith("{\"roles\": [\"assistant\"], \"content\": \"echo: <|im_start|>user\\nstream me<|im_end|>"), r);
    }

    @Test
    void tritonMockConvention_withDims11_answers() throws Exception {
        assertEquals("{\"text\": \"echo: as triton does\"}", check("trt"));
        assertTrue(marks().contains("inputs stream,text_input"), "mock_trt gets its two required inputs and not its optional one: " + marks());
    }

    @Test
    void embeddings_base64ByDefaultAndFloat() throws Exception {
        assertEquals("{\"base64\": [[1.0, 1.5, -2.0], [3.0, 1.5, -2.0]], \"float\": [2.0, 1.5, -2.0]}", check("embeddings"));
    }

    @Test
    void errors_raiseTheClientsOwnExceptions() throws Exception {
        assertEquals("[\"not_found\", \"auth\", \"no_template\", \"mid_stream\"]", check("errors"));
    }

    @Test
    void clientThatCloses_cancelsTheGenerationInTheModel() throws Exception {
        assertEquals("3", check("disconnect"));
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (marks().stream().noneMatch(m -> m.startsWith("cancelled FOREVER py after "))) {
            if (System.nanoTime() > end) {
                fail("the model never saw the closed stream: " + marks() + "\n" + server.output());
            }
            Thread.sleep(20);
        }
    }

    // ---- helpers ----

    private String check(String name) throws Exception {
        Path script = dir.resolve("client.py");
        if (!Files.exists(script)) {
            Files.writeString(script, CLIENT_PY);
        }
        Process p = new ProcessBuilder(python.toString(), script.toString(), base, KEY, name).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the client did not finish: " + out);
        assertEquals(0, p.exitValue(), out + "\n" + server.output());
        for (String line : out.split("\n")) {
            if (line.startsWith("ok " + name + " ")) {
                return line.substring(("ok " + name + " ").length());
            }
        }
        throw new AssertionError("no result from the client: " + out);
    }

    private void model(Path repo, String name, String py, boolean decoupled, String io) throws IOException {
        Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.writeString(repo.resolve(name).resolve("1/model.py"), py);
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), """
                name: "%s"
                backend: "python"
                model_transaction_policy { decoupled: %s }
                %s
                instance_group [{ count: 1 kind: KIND_CPU }]
                parameters { key: "marks" value { string_value: "%s" } }
                """.formatted(name, decoupled, io, dir.resolve("marks")));
    }

    private List<String> marks() throws IOException {
        Path f = dir.resolve("marks");
        return Files.exists(f) ? Files.readAllLines(f) : new ArrayList<>();
    }
}
