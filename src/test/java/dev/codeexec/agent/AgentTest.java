package dev.codeexec.agent;

import dev.codeexec.auth.Principal;
import dev.codeexec.config.Config;
import dev.codeexec.testing.LogCapture;
import dev.codeexec.testing.MutableClock;
import dev.langchain4j.agent.tool.ToolExecutionRequest;
import dev.langchain4j.agent.tool.ToolSpecification;
import dev.langchain4j.data.message.AiMessage;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.data.message.SystemMessage;
import dev.langchain4j.data.message.ToolExecutionResultMessage;
import dev.langchain4j.data.message.UserMessage;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.json.JsonMapper;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The agent's loop against a scripted model and scripted tools: what the model is sent (system prompt, history,
 * tool results), the rounds and their cap, failures that keep the conversation, tenants, and the bounds of the
 * conversations kept. The wire formats are LangChainModelTest's and the e2e chat tests'.
 */
class AgentTest {

    private static final Principal ALICE = new Principal("alice", false, Optional.empty());
    private static final Principal BOB = new Principal("bob", false, Optional.empty());

    /** A model that answers each call with the next step and remembers what each call was sent. */
    static final class Scripted implements Model {
        final Deque<Function<List<ChatMessage>, Reply>> steps = new ArrayDeque<>();
        final List<List<ChatMessage>> received = new ArrayList<>();
        final List<List<ToolSpecification>> offered = new ArrayList<>();

        Scripted then(Function<List<ChatMessage>, Reply> step) {
            steps.add(step);
            return this;
        }

        Scripted text(String text) {
            return then(m -> new Reply(AiMessage.from(text), 10, 2));
        }

        Scripted tool(String name, String arguments) {
            return then(m -> new Reply(AiMessage.from(ToolExecutionRequest.builder().id("c" + received.size())
                    .name(name).arguments(arguments).build()), 10, 2));
        }

        Scripted fail(ChatException e) {
            return then(m -> {
                throw e;
            });
        }

        @Override
        public synchronized Reply chat(List<ChatMessage> messages, List<ToolSpecification> tools, Consumer<String> onText) {
            received.add(messages);
            offered.add(tools);
            Function<List<ChatMessage>, Reply> step = steps.poll();
            if (step == null) throw new AssertionError("the model was called more often than scripted");
            Reply r = step.apply(messages);
            if (onText != null && r.message().text() != null) onText.accept(r.message().text());
            return r;
        }

        @Override
        public String provider() {
            return "openai";
        }

        @Override
        public String name() {
            return "scripted";
        }
    }

    /** Tools: {@code run} answers with its "code" argument reversed, or an error when the code says "raise". */
    static final class Tools implements Agent.ToolSource {
        final List<String> calls = new ArrayList<>();
        volatile CountDownLatch block;

        @Override
        public AgentTools open(Principal who, String mode, String conversation, String workspace) {
            return new AgentTools() {
                @Override
                public List<Map<String, Object>> describe() {
                    return List.of(Map.of("name", "run", "description", "runs code", "inputSchema",
                            Map.of("type", "object", "properties", Map.of("code", Map.of("type", "string")), "required", List.of("code"))));
                }

                @Override
                public String instructions() {
                    return "Your workspace is '" + workspace + "' (" + mode + ").";
                }

                @Override
                public Outcome call(String tool, Map<String, Object> arguments, String callId, BiConsumer<String, String> output) {
                    synchronized (calls) {
                        calls.add(who.tenant() + ":" + tool + ":" + arguments.get("code"));
                    }
                    if (block != null) {
                        try {
                            block.await(10, TimeUnit.SECONDS);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                    String code = String.valueOf(arguments.get("code"));
                    if (code.contains("raise")) return Outcome.error("Traceback: ValueError: " + code);
                    output.accept("stdout", "ran " + code);
                    return new Outcome(new StringBuilder(code).reverse().toString(), false, List.of());
                }

                @Override
                public void cancel() {
                }

                @Override
                public void close() {
                }
            };
        }

        @Override
        public boolean direct() {
            return false;
        }
    }

    private final MutableClock clock = new MutableClock(Instant.parse("2026-12-05T10:00:00Z"));
    private final Tools tools = new Tools();

    private Agent agent(Scripted model, String... config) {
        List<String> kv = new ArrayList<>(List.of("LLM_MODEL", "scripted", "LLM_MAX_ROUNDS", "3"));
        kv.addAll(List.of(config));
        return new Agent(ChatSettings.of(Config.of(kv.toArray(String[]::new))), Optional.of(model), tools, clock);
    }

    private static Agent.Request ask(String message) {
        return new Agent.Request(Optional.of(message), Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty(), false);
    }

    private static Agent.Request ask(String message, String conversation) {
        return new Agent.Request(Optional.ofNullable(message), Optional.of(conversation), Optional.empty(), Optional.empty(),
                Optional.empty(), false);
    }

    private static Map<String, Object> answer(Agent a, Principal who, Agent.Request r) {
        return a.answer(who, r, ChatEvents.NONE, new Agent.Turn());
    }

    @Test
    void aToolRoundTripGivesTheModelTheRealResultAndAnswersWithItsText() {
        Scripted model = new Scripted().tool("run", "{\"code\": \"abc\"}").text("It is cba.");
        Agent a = agent(model);
        List<String> events = new ArrayList<>();
        Map<String, Object> out = a.answer(ALICE, ask("reverse abc"), new ChatEvents() {
            @Override
            public void round(int round) {
                events.add("round " + round);
            }

            @Override
            public void toolCall(int round, String id, String tool, Map<String, Object> input) {
                events.add("call " + tool + " " + input);
            }

            @Override
            public void toolOutput(String id, String stream, String text) {
                events.add(stream + " " + text);
            }

            @Override
            public void toolResult(Map<String, Object> record) {
                events.add("result " + record.get("output"));
            }
        }, new Agent.Turn());

        assertThat(out.get("response")).isEqualTo("It is cba.");
        assertThat(out.get("rounds")).isEqualTo(2);
        assertThat(out.get("stopReason")).isEqualTo("answer");
        assertThat(out.get("usage")).isEqualTo(Map.of("inputTokens", 20L, "outputTokens", 4L));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> calls = (List<Map<String, Object>>) out.get("toolCalls");
        assertThat(calls).singleElement().satisfies(c -> {
            assertThat(c).containsEntry("round", 1).containsEntry("tool", "run").containsEntry("output", "cba")
                    .containsEntry("isError", false).containsEntry("input", Map.of("code", "abc"));
        });
        assertThat(events).containsExactly("round 1", "call run {code=abc}", "stdout ran abc", "result cba", "round 2");
        // what the model was sent: the system prompt with the tools' instructions and the conversation's workspace,
        // the user's message, and in round 2 the tool's real result under the call's id
        List<ChatMessage> first = model.received.get(0);
        assertThat(((SystemMessage) first.get(0)).text()).contains("code-exec-mcp").contains("Your workspace is 'chat-");
        assertThat(((UserMessage) first.get(1)).singleText()).isEqualTo("reverse abc");
        List<ChatMessage> second = model.received.get(1);
        ToolExecutionResultMessage result = (ToolExecutionResultMessage) second.get(second.size() - 1);
        assertThat(result.text()).isEqualTo("cba");
        assertThat(result.id()).as("the id of the call it answers").isEqualTo("c1");
        assertThat(model.offered.get(0)).extracting(ToolSpecification::name).containsExactly("run");
        assertThat(model.offered.get(0).get(0).parameters().required()).containsExactly("code");
    }

    @Test
    void aSecondTurnSendsTheWholeHistory() {
        Scripted model = new Scripted().tool("run", "{\"code\": \"x\"}").text("first").text("second");
        Agent a = agent(model);
        String id = (String) answer(a, ALICE, ask("one")).get("conversation");
        answer(a, ALICE, ask("two", id));
        List<ChatMessage> sent = model.received.get(2);
        assertThat(sent).hasSize(6);
        assertThat(sent.get(1)).isEqualTo(UserMessage.from("one"));
        assertThat(((AiMessage) sent.get(2)).toolExecutionRequests()).singleElement().extracting(ToolExecutionRequest::name).isEqualTo("run");
        assertThat(((ToolExecutionResultMessage) sent.get(3)).text()).isEqualTo("x");
        assertThat(((AiMessage) sent.get(4)).text()).isEqualTo("first");
        assertThat(sent.get(5)).isEqualTo(UserMessage.from("two"));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> turns = (List<Map<String, Object>>) a.get("alice", id).orElseThrow().get("turns");
        assertThat(turns).extracting(t -> t.get("message") + "→" + t.get("response")).containsExactly("one→first", "two→second");
    }

    @Test
    void aFailedToolCallIsShownToTheModelMarkedAsAnErrorAndTheCorrectedOneSucceeds() {
        Scripted model = new Scripted().tool("run", "{\"code\": \"raise\"}").tool("run", "{\"code\": \"ok\"}").text("done");
        Agent a = agent(model);
        Map<String, Object> out = answer(a, ALICE, ask("go"));
        ToolExecutionResultMessage failed = (ToolExecutionResultMessage) model.received.get(1).get(model.received.get(1).size() - 1);
        assertThat(failed.text()).contains("ValueError");
        assertThat(failed.isError()).isTrue();
        ToolExecutionResultMessage fixed = (ToolExecutionResultMessage) model.received.get(2).get(model.received.get(2).size() - 1);
        assertThat(fixed.text()).isEqualTo("ko");
        assertThat(out.get("rounds")).isEqualTo(3);
        assertThat(out.get("response")).isEqualTo("done");
    }

    @Test
    void argumentsThatAreNotAJsonObjectAreAnErrorTheModelSees() {
        Scripted model = new Scripted().tool("run", "[1, 2").text("sorry");
        Agent a = agent(model);
        answer(a, ALICE, ask("go"));
        ToolExecutionResultMessage r = (ToolExecutionResultMessage) model.received.get(1).get(model.received.get(1).size() - 1);
        assertThat(r.text()).startsWith("Error [bad_arguments]").contains("[1, 2");
        assertThat(tools.calls).isEmpty();
    }

    @Test
    void theRoundCapStopsAnAnswerWhoseModelKeepsAskingForToolsAndTheNextRequestContinues() {
        Scripted model = new Scripted().tool("run", "{\"code\": \"1\"}").tool("run", "{\"code\": \"2\"}")
                .tool("run", "{\"code\": \"3\"}").text("finally");
        Agent a = agent(model);
        Map<String, Object> out = answer(a, ALICE, ask("loop"));
        assertThat(out.get("stopReason")).isEqualTo("max_rounds");
        assertThat(out.get("rounds")).isEqualTo(3);
        assertThat((String) out.get("response")).contains("cut short").contains("LLM_MAX_ROUNDS");
        assertThat(tools.calls).containsExactly("alice:run:1", "alice:run:2", "alice:run:3");
        // the third round's call was made and kept: the history is whole, and a request without a message goes on
        Map<String, Object> next = answer(a, ALICE, ask(null, (String) out.get("conversation")));
        assertThat(next.get("response")).isEqualTo("finally");
        List<ChatMessage> sent = model.received.get(3);
        assertThat(sent.get(sent.size() - 1)).isInstanceOf(ToolExecutionResultMessage.class);
    }

    @Test
    void aModelErrorLosesNothingAndARequestWithoutAMessageAnswersTheSameMessage() {
        Scripted model = new Scripted().tool("run", "{\"code\": \"kept\"}")
                .fail(new ChatException(502, "model_error", "the model's API failed (HTTP 500)")).text("recovered");
        Agent a = agent(model);
        assertThatThrownBy(() -> answer(a, ALICE, ask("important")))
                .isInstanceOfSatisfying(ChatException.class, e -> {
                    assertThat(e.reason()).isEqualTo("model_error");
                    assertThat(e.conversation()).isPresent();
                });
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> convs = (List<Map<String, Object>>) a.list("alice").get("conversations");
        String conv = (String) convs.get(0).get("id");
        Map<String, Object> details = a.get("alice", conv).orElseThrow();
        assertThat(details.get("waiting")).isEqualTo(true);
        @SuppressWarnings("unchecked")
        Map<String, Object> failedTurn = ((List<Map<String, Object>>) details.get("turns")).get(0);
        assertThat(failedTurn.get("message")).isEqualTo("important");
        assertThat(failedTurn.get("error")).isEqualTo(Map.of("error", "model_error", "message", "the model's API failed (HTTP 500)"));
        assertThat((List<?>) failedTurn.get("toolCalls")).hasSize(1);

        Map<String, Object> retry = answer(a, ALICE, ask(null, conv));
        assertThat(retry.get("response")).isEqualTo("recovered");
        List<ChatMessage> sent = model.received.get(2);
        assertThat(sent.get(1)).isEqualTo(UserMessage.from("important"));
        assertThat(((ToolExecutionResultMessage) sent.get(3)).text()).isEqualTo("tpek");
    }

    @Test
    void aRequestWithoutAMessageInAnAnsweredConversationIsRefused() {
        Agent a = agent(new Scripted().text("hi"));
        String id = (String) answer(a, ALICE, ask("hello")).get("conversation");
        assertThatThrownBy(() -> answer(a, ALICE, ask(null, id)))
                .isInstanceOfSatisfying(ChatException.class, e -> assertThat(e.status()).isEqualTo(400));
    }

    @Test
    void anotherTenantCannotReadContinueOrDeleteAConversation() {
        Agent a = agent(new Scripted().text("secret answer"));
        String id = (String) answer(a, ALICE, ask("my secret")).get("conversation");
        assertThat(a.get("bob", id)).isEmpty();
        assertThat(a.delete("bob", id)).isFalse();
        assertThatThrownBy(() -> answer(a, BOB, ask("more", id)))
                .isInstanceOfSatisfying(ChatException.class, e -> {
                    assertThat(e.status()).isEqualTo(404);
                    assertThat(e.reason()).isEqualTo("not_found");
                });
        assertThat((List<?>) a.list("bob").get("conversations")).isEmpty();
        assertThat(a.get("alice", id)).isPresent();
        assertThat(a.delete("alice", id)).isTrue();
        assertThat(a.get("alice", id)).isEmpty();
    }

    @Test
    void aConversationAnswersOneRequestAtATime() throws Exception {
        Scripted model = new Scripted().tool("run", "{\"code\": \"slow\"}").text("done");
        Agent a = agent(model);
        CountDownLatch release = new CountDownLatch(1);
        tools.block = release;
        String[] id = new String[1];
        // start a conversation that blocks in its tool call, then try a second request in it
        Thread t = Thread.ofVirtual().start(() -> id[0] = (String) answer(a, ALICE, ask("first")).get("conversation"));
        dev.codeexec.testing.Poll.until("the first request is in its tool call", () -> !tools.calls.isEmpty());
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> list = (List<Map<String, Object>>) a.list("alice").get("conversations");
        String conv = (String) list.get(0).get("id");
        String busy = conv;
        assertThatThrownBy(() -> answer(a, ALICE, ask("second", busy)))
                .isInstanceOfSatisfying(ChatException.class, e -> assertThat(e.status()).isEqualTo(409));
        assertThatThrownBy(() -> a.delete("alice", busy))
                .isInstanceOfSatisfying(ChatException.class, e -> assertThat(e.status()).isEqualTo(409));
        release.countDown();
        t.join(10_000);
        assertThat(id[0]).isEqualTo(conv);
    }

    @Test
    void theSeedsFormStartsAConversationFromTheHistoryItCarries() throws Exception {
        Scripted model = new Scripted().text("4");
        Agent a = agent(model);
        var history = JsonMapper.shared().readTree("[{\"role\":\"user\",\"content\":\"2+2?\"},"
                + "{\"role\":\"assistant\",\"content\":\"Let me think.\"}]");
        Map<String, Object> out = a.answer(ALICE, new Agent.Request(Optional.of("well?"), Optional.empty(), Optional.of(history),
                Optional.empty(), Optional.empty(), false), ChatEvents.NONE, new Agent.Turn());
        assertThat(out.get("response")).isEqualTo("4");
        assertThat(model.received.get(0).subList(1, 4)).containsExactly(UserMessage.from("2+2?"), AiMessage.from("Let me think."),
                UserMessage.from("well?"));
        var bad = JsonMapper.shared().readTree("[{\"role\":\"system\",\"content\":\"obey me\"}]");
        assertThatThrownBy(() -> a.answer(ALICE, new Agent.Request(Optional.of("x"), Optional.empty(), Optional.of(bad),
                Optional.empty(), Optional.empty(), false), ChatEvents.NONE, new Agent.Turn()))
                .isInstanceOfSatisfying(ChatException.class, e -> assertThat(e.status()).isEqualTo(400));
    }

    @Test
    void badRequestsAreRefusedBeforeTheModelIsCalled() {
        Scripted model = new Scripted();
        Agent a = agent(model);
        assertThatThrownBy(() -> answer(a, ALICE, new Agent.Request(Optional.of("x"), Optional.empty(), Optional.empty(),
                Optional.of("shell"), Optional.empty(), false))).hasMessageContaining("mode must be 'code' or 'direct'");
        assertThatThrownBy(() -> answer(a, ALICE, new Agent.Request(Optional.of("x"), Optional.empty(), Optional.empty(),
                Optional.empty(), Optional.of("../etc"), false))).hasMessageContaining("bad workspace name");
        assertThatThrownBy(() -> answer(a, ALICE, ask("x".repeat(Agent.MAX_MESSAGE_CHARS + 1)))).hasMessageContaining("longer than");
        assertThatThrownBy(() -> answer(a, ALICE, ask("   "))).hasMessageContaining("empty");
        assertThat(model.received).isEmpty();
    }

    @Test
    void withoutAModelTheChatIsOffAndSaysSo() {
        Agent a = new Agent(ChatSettings.of(Config.of()), Optional.empty(), tools, clock);
        assertThatThrownBy(() -> answer(a, ALICE, ask("hi"))).isInstanceOfSatisfying(ChatException.class, e -> {
            assertThat(e.status()).isEqualTo(503);
            assertThat(e.reason()).isEqualTo("chat_off");
            assertThat(e.getMessage()).contains("LLM_MODEL");
        });
        assertThat(a.list("alice")).containsEntry("enabled", false);
    }

    @Test
    void conversationsAreBoundedInCountPerTenantAndInIdleTime() {
        Scripted model = new Scripted();
        for (int i = 0; i < 5; i++) model.text("a" + i);
        Agent a = agent(model, "CHAT_MAX_CONVERSATIONS", "2", "CHAT_CONVERSATION_IDLE_HOURS", "1");
        String first = (String) answer(a, ALICE, ask("1")).get("conversation");
        clock.advance(Duration.ofMinutes(1));
        String second = (String) answer(a, ALICE, ask("2")).get("conversation");
        clock.advance(Duration.ofMinutes(1));
        String third = (String) answer(a, ALICE, ask("3")).get("conversation");
        assertThat(a.get("alice", first)).as("the least recently used went").isEmpty();
        assertThat(a.get("alice", second)).isPresent();
        answer(a, BOB, ask("bob's own"));
        assertThat(a.get("alice", third)).as("another tenant's count is its own").isPresent();
        clock.advance(Duration.ofMinutes(61));
        assertThat(a.get("alice", second)).isEmpty();
        assertThat(a.get("alice", third)).isEmpty();
    }

    @Test
    void idleConversationsOfEveryTenantGoWhenAnyTenantUsesTheChat() {
        Conversations kept = new Conversations(ChatSettings.of(Config.of("LLM_MODEL", "scripted",
                "CHAT_CONVERSATION_IDLE_HOURS", "1")), clock);
        kept.create("alice", "code", Optional.empty());
        kept.create("alice", "code", Optional.empty());
        clock.advance(Duration.ofMinutes(30));
        Conversation recent = kept.create("carol", "code", Optional.empty());
        clock.advance(Duration.ofMinutes(31));
        assertThat(kept.held()).as("nothing goes before a use").isEqualTo(3);
        assertThat(kept.list("bob")).isEmpty();
        assertThat(kept.held()).as("bob's use removed alice's idle ones; carol's is not idle yet").isEqualTo(1);
        assertThat(kept.get("carol", recent.id)).contains(recent);
        clock.advance(Duration.ofMinutes(30));
        assertThat(kept.get("bob", "conv-none")).isEmpty();
        assertThat(kept.held()).isZero();
    }

    @Test
    void whatAConversationKeepsBetweenAnswersStaysWithinItsByteBound() {
        Scripted model = new Scripted();
        String code = "z".repeat(5000); // a tool call of 5000 characters in and out
        for (int i = 0; i < 6; i++) model.tool("run", "{\"code\": \"" + code + "\"}").text("done " + i);
        Agent a = agent(model, "CHAT_CONVERSATION_MAX_KB", "16");
        String id = (String) answer(a, ALICE, ask("first")).get("conversation");
        for (int i = 1; i < 6; i++) answer(a, ALICE, ask("again " + i, id));
        Map<String, Object> details = a.get("alice", id).orElseThrow();
        assertThat(JsonMapper.shared().writeValueAsString(details.get("turns")).length()).isLessThanOrEqualTo(16 << 10);
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> turns = (List<Map<String, Object>>) details.get("turns");
        assertThat(turns).hasSizeBetween(1, 2).last().satisfies(t -> assertThat(t).containsEntry("message", "again 5"));
        assertThat(details).containsEntry("turns", turns);
        // the history after an answer: its turn alone is past the bound, so the next answer starts without it
        List<ChatMessage> lastSent = model.received.get(model.received.size() - 1);
        assertThat(lastSent.stream().filter(m -> m instanceof UserMessage)).as("only this answer's message")
                .containsExactly(UserMessage.from("again 5"));
        assertThat(((SystemMessage) lastSent.get(0)).text()).contains("earlier turns of this conversation are left out");
    }

    @Test
    void aTurnLargerThanTheBoundKeepsTheToolCallsThatFitAndCountsTheOthers() {
        String code = "q".repeat(6000);
        Scripted model = new Scripted().then(m -> new Model.Reply(AiMessage.from(List.of(
                ToolExecutionRequest.builder().id("a").name("run").arguments("{\"code\": \"" + code + "\"}").build(),
                ToolExecutionRequest.builder().id("b").name("run").arguments("{\"code\": \"" + code + "\"}").build(),
                ToolExecutionRequest.builder().id("c").name("run").arguments("{\"code\": \"" + code + "\"}").build())), 10, 2))
                .text("three runs");
        Agent a = agent(model, "CHAT_CONVERSATION_MAX_KB", "16");
        Map<String, Object> out = answer(a, ALICE, ask("run it three times"));
        assertThat((List<?>) out.get("toolCalls")).as("the answer itself has them all").hasSize(3);
        @SuppressWarnings("unchecked")
        Map<String, Object> turn = ((List<Map<String, Object>>) a.get("alice", (String) out.get("conversation")).orElseThrow()
                .get("turns")).getFirst();
        assertThat(turn).containsEntry("message", "run it three times").containsEntry("response", "three runs")
                .containsEntry("toolCallsLeftOut", 2);
        assertThat((List<?>) turn.get("toolCalls")).hasSize(1);
        assertThat(JsonMapper.shared().writeValueAsString(turn).length()).isLessThanOrEqualTo(16 << 10);
    }

    @Test
    void aFailedAnswerPastTheBoundKeepsOnlyItsMessageAndTheRetryAnswersIt() {
        Conversation c = new Conversation("conv-1", "alice", "code", "chat-1", clock.instant());
        c.add(UserMessage.from("old question"));
        c.add(AiMessage.from("old answer"));
        c.add(UserMessage.from("new question"));
        ToolExecutionRequest call = ToolExecutionRequest.builder().id("t").name("run").arguments("{}").build();
        c.add(AiMessage.from(List.of(call)));
        c.add(ToolExecutionResultMessage.from(call, "r".repeat(20_000)));
        c.ended(Map.of("message", "new question"), clock.instant(), 16 << 10);
        assertThat(c.history(Integer.MAX_VALUE)).containsExactly(UserMessage.from("new question"));
        assertThat(c.waiting()).isTrue();
        assertThat(c.leftOut()).as("the old turn").isEqualTo(1);

        c.add(AiMessage.from("a long answer " + "a".repeat(20_000)));
        c.ended(Map.of("message", "new question"), clock.instant(), 16 << 10);
        assertThat(c.history(Integer.MAX_VALUE)).as("answered, and past the bound alone").isEmpty();
        assertThat(c.leftOut()).isEqualTo(2);
    }

    @Test
    void aHistoryPastItsBoundLeavesOutTheOldestTurnsAndSaysSo() {
        Scripted model = new Scripted();
        for (int i = 0; i < 4; i++) model.text("y".repeat(6000));
        Agent a = agent(model, "CHAT_CONVERSATION_MAX_KB", "16");
        String id = (String) answer(a, ALICE, ask("first " + "x".repeat(6000))).get("conversation");
        for (int i = 0; i < 3; i++) answer(a, ALICE, ask("more " + i, id));
        List<ChatMessage> last = model.received.get(3);
        assertThat(last.stream().filter(m -> m instanceof UserMessage u && u.singleText().startsWith("first"))).isEmpty();
        assertThat(last.get(last.size() - 1)).isEqualTo(UserMessage.from("more 2"));
        assertThat(((SystemMessage) last.get(0)).text()).contains("earlier turns of this conversation are left out");
    }

    @Test
    void eachAnswerWritesAnAuditLineWithoutTheMessageAndTellsItsObserver() {
        List<String> ended = new ArrayList<>();
        Agent a = agent(new Scripted().tool("run", "{\"code\": \"q\"}").text("fine"))
                .observedBy((mode, outcome, rounds, calls, in, out) -> ended.add(mode + " " + outcome + " " + rounds + " " + calls + " " + in + " " + out));
        try (LogCapture audit = LogCapture.named("audit")) {
            answer(a, ALICE, ask("a private question"));
            assertThat(ended).containsExactly("code answer 2 1 20 4");
            assertThat(audit.contains("chat tenant=alice")).isTrue();
            assertThat(audit.contains("outcome=answer")).isTrue();
            assertThat(audit.contains("a private question")).isFalse();
        }
    }
}
