#!/usr/bin/env escript
%% -*- erlang -*-
%% granary_compare.escript: the Erlang/OTP comparison arm of granary-bench.
%%
%%   escript bench/compare/erlang/granary_compare.escript      # every scenario, 5 rounds
%%   escript bench/compare/erlang/granary_compare.escript --rounds=3 --scenarios=ask,chain
%%   escript bench/compare/erlang/granary_compare.escript --scale=0.2 --json=erlang.json
%%
%% A second in-process reference for `granary-bench --hosted`, beside
%% granary-compare-caf: the same scenario names, operation counts (at the
%% same --scale), warm-up and interleaved rounds, RESULT / SUMMARY / ENV
%% lines (mode=erlang) and JSON report (bench/report.proto in protobuf's JSON
%% mapping, which this script writes itself: OTP 25 has no JSON module), so
%% bench/make_results.py pairs each row with Granary's and CAF's. Every round
%% is verified against what the processes report; exits 1 when a round was
%% not, 2 on bad flags or a JSON report that cannot be written.
%%
%% Flags (absl style, --name=value or --name value):
%%   --scenarios  comma-separated (default: all of activation, activation_one,
%%                oneway, oneway_spread, ask, chain, pingpong, fanout)
%%   --rounds     measured rounds per scenario (5, at least 1)
%%   --warmup     unreported warm-up rounds per scenario (1)
%%   --scale      multiplies every operation count (1; in (0, 1000])
%%   --workers    schedulers online (0: every scheduler the VM started, one
%%                per core; ERL_FLAGS="+S N" starts N)
%%   --depth      depth of the chain scenario (5)
%%   --fanout     processes the fanout head pings at once (10; 1..1000)
%%   --json       also write the summaries to this file
%%
%% How each scenario's operation differs from Granary's (the report's
%% footnotes):
%%
%% Every scenario
%%   - Processes are addressed by pid, not by grain id: no id hashing, no
%%     activation-table lookup and no directory entry on any message. The
%%     long-lived processes are spawned once and kept across rounds, as
%%     Granary's grains stay active across rounds.
%%   - Messages are Erlang terms (tuples of atoms, integers, pids and
%%     references) copied into the receiver's heap; nothing is serialized.
%%   - A request is a message {request, From, Tag, Body} with a fresh
%%     reference as Tag, answered by {reply, Tag, Value}: no deadline, no
%%     monitor of the callee (gen_server:call would add both). The waiting
%%     side has a 60 s guard against a lost reply that fails the round; it is
%%     not a per-request deadline.
%%   - The outside caller is this script's main process: an Erlang process
%%     on a BEAM scheduler like the callees, not a thread outside the
%%     runtime. Idle schedulers spin for a while before they sleep (the BEAM
%%     default, +sbwt medium), as Granary's idle workers spin --idle_spin
%%     pauses before they sleep.
%%   - No turn budget: a process runs until it has used its reductions (about
%%     4,000 function calls) or waits for a message; no reentrancy rules.
%%
%% activation / activation_one
%%   - Processes are spawned explicitly (spawn_monitor) rather than
%%     activated by a first call to an id; the first ping confirms the start,
%%     as Granary's first call does, but there is no placement, no directory
%%     registration and no OnActivate/OnDeactivate turn (a process counts
%%     itself as started, in an atomic counter, before its first receive).
%%     The sample runs from the spawn to the pong.
%%   - Stopping is an exit signal (exit(Pid, shutdown)) confirmed by the
%%     monitor's 'DOWN' message; Granary sends a Deactivate call, awaits its
%%     reply, and waits for the silo's OnDeactivate count.
%%
%% oneway / oneway_spread
%%   - Pid ! Msg from the main process: an enqueue with no sender, where a
%%     Granary Tell is a one-way call routed by grain id. Latency is sampled
%%     the same way (every 16th tell carries its send time on the VM's
%%     monotonic clock; the counter records delivery delay).
%%
%% ask
%%   - One request and a selective receive on its reference per sample.
%%
%% chain
%%   - depth + 1 links spawned up front, each holding its successor's pid.
%%     A link forwards a request as a request of its own and keeps the
%%     caller's tag in a map until the reply arrives, so it never blocks (the
%%     equivalent of co_await).
%%
%% pingpong
%%   - Balls are {ball, Sender, Remaining} answered to Sender; the volley is
%%     started by a request to player A, answered once the last ball arrives.
%%
%% fanout
%%   - The head holds its leaves' pids and gathers their pongs in a map keyed
%%     by a reference per fan-out rather than WhenAll over tasks.
-mode(compile).

-define(PROGRAM, "granary_compare.escript").
-define(MODE, "erlang").
%% How long a wait for a reply may last before the round is given up as
%% failed: a harness guard against a lost message, not a deadline.
-define(STUCK_MS, 60000).
-define(SPREAD_TARGETS, 1000).
-define(VOLLEY, 1000).
-define(SCENARIOS, ["activation", "activation_one", "oneway", "oneway_spread",
                    "ask", "chain", "pingpong", "fanout"]).
-define(FLAGS, ["scenarios", "rounds", "warmup", "scale", "workers", "depth",
                "fanout", "json"]).

main(Args) ->
    case parse_flags(Args) of
        help ->
            io:put_chars(usage()),
            erlang:halt(0);
        {error, Message} ->
            io:format(standard_error, "~s: ~ts~n", [?PROGRAM, Message]),
            erlang:halt(2);
        {ok, Opts} ->
            erlang:halt(run(Opts))
    end.

usage() ->
    "Erlang/OTP comparison arm of granary-bench. Example:\n"
    "  escript granary_compare.escript --rounds=3 --scenarios=ask,chain\n"
    "Flags: --scenarios=a,b --rounds=5 --warmup=1 --scale=1 --workers=0 "
    "--depth=5 --fanout=10 --json=FILE\n".

%% ---------------------------------------------------------------------------
%% Flags: the checks and messages of granary-compare-caf.

parse_flags(Args) ->
    case split_flags(Args, #{}) of
        help -> help;
        {error, _} = E -> E;
        {ok, Raw} -> check_flags(Raw)
    end.

split_flags([], Acc) ->
    {ok, Acc};
split_flags([A | _], _) when A =:= "--help"; A =:= "-h"; A =:= "--helpfull" ->
    help;
split_flags(["--" ++ Flag | Rest], Acc) ->
    case string:split(Flag, "=") of
        [Name, Value] -> store_flag(Name, Value, Rest, Acc);
        [Name] ->
            case Rest of
                [Value | Rest2] -> store_flag(Name, Value, Rest2, Acc);
                [] -> {error, io_lib:format("flag '--~ts' has no value", [Name])}
            end
    end;
split_flags([Arg | _], _) ->
    {error, io_lib:format("unexpected argument '~ts' (flags are --name=value)", [Arg])}.

store_flag(Name, Value, Rest, Acc) ->
    case lists:member(Name, ?FLAGS) of
        true -> split_flags(Rest, Acc#{Name => Value});
        false -> {error, io_lib:format("unknown flag '--~ts' (known: ~ts)",
                                       [Name, lists:join(",", ?FLAGS)])}
    end.

check_flags(Raw) ->
    try
        Rounds = int_flag(Raw, "rounds", 5),
        Warmup = int_flag(Raw, "warmup", 1),
        Scale = number_flag(Raw, "scale", 1.0),
        Depth = int_flag(Raw, "depth", 5),
        Fanout = int_flag(Raw, "fanout", 10),
        Workers = int_flag(Raw, "workers", 0),
        Rounds >= 1 orelse throw("--rounds must be at least 1"),
        Warmup >= 0 orelse throw("--warmup must not be negative"),
        (Scale > 0 andalso Scale =< 1000) orelse throw("--scale must be in (0, 1000]"),
        Scenarios = parse_scenarios(maps:get("scenarios", Raw, "")),
        Depth >= 1 orelse throw("--depth must be at least 1"),
        (Fanout >= 1 andalso Fanout =< 1000) orelse throw("--fanout must be in [1, 1000]"),
        Workers >= 0 orelse throw("--workers must not be negative"),
        Started = erlang:system_info(schedulers),
        Workers =< Started orelse
            throw(io_lib:format("--workers must be at most ~B, the schedulers this VM "
                                "started (ERL_FLAGS=\"+S N\" starts more)", [Started])),
        {ok, #{rounds => Rounds, warmup => Warmup, scale => Scale, depth => Depth,
               fanout => Fanout, workers => Workers, scenarios => Scenarios,
               json => maps:get("json", Raw, "")}}
    catch
        throw:Message -> {error, Message}
    end.

int_flag(Raw, Name, Default) ->
    case maps:find(Name, Raw) of
        error -> Default;
        {ok, Text} ->
            try list_to_integer(string:trim(Text))
            catch error:badarg ->
                throw(io_lib:format("--~s must be an integer, got '~ts'", [Name, Text]))
            end
    end.

number_flag(Raw, Name, Default) ->
    case maps:find(Name, Raw) of
        error -> Default;
        {ok, Text} ->
            case parse_number(string:trim(Text)) of
                {ok, N} -> N;
                error -> throw(io_lib:format("--~s must be a number, got '~ts'", [Name, Text]))
            end
    end.

%% A decimal number as absl reads a double flag: "2", "0.2", ".5", "1e-2".
parse_number(Text) ->
    try {ok, float(list_to_integer(Text))}
    catch error:badarg ->
        try {ok, list_to_float(float_form(Text))}
        catch error:badarg -> error
        end
    end.

%% Rewrites a number into the digits.digits[e...] form list_to_float needs.
float_form(Text) ->
    {Mantissa, Exponent} = lists:splitwith(fun(C) -> C =/= $e andalso C =/= $E end, Text),
    {Sign, Digits} = case Mantissa of
                         [S | D] when S =:= $-; S =:= $+ -> {[S], D};
                         _ -> {"", Mantissa}
                     end,
    Fixed = case string:split(Digits, ".") of
                [Int] -> Int ++ ".0";
                [Int, Frac] -> nonempty(Int) ++ "." ++ nonempty(Frac);
                _ -> Digits
            end,
    Sign ++ Fixed ++ Exponent.

nonempty("") -> "0";
nonempty(Digits) -> Digits.

parse_scenarios("") ->
    ?SCENARIOS;
parse_scenarios(Flag) ->
    case string:lexemes(Flag, ",") of
        [] -> throw("--scenarios is empty");
        Names ->
            [lists:member(N, ?SCENARIOS) orelse
                 throw(io_lib:format("unknown scenario '~ts' (known: ~ts)",
                                     [N, lists:join(",", ?SCENARIOS)]))
             || N <- Names],
            Names
    end.

%% ---------------------------------------------------------------------------
%% The run: long-lived processes, the round loop, the report.

run(Opts = #{workers := Workers}) ->
    Workers > 0 andalso erlang:system_flag(schedulers_online, Workers),
    Ctx = start_processes(Opts),
    Env = [{"mode", ?MODE},
           {"framework", "erlang"},
           {"otp_release", erlang:system_info(otp_release)},
           {"erts_version", erlang:system_info(version)},
           {"workers", integer_to_list(erlang:system_info(schedulers_online))},
           {"depth", integer_to_list(maps:get(depth, Opts))},
           {"fanout", integer_to_list(maps:get(fanout, Opts))},
           {"scale", format_g(maps:get(scale, Opts))},
           {"rounds", integer_to_list(maps:get(rounds, Opts))},
           {"warmup", integer_to_list(maps:get(warmup, Opts))}],
    Status = run_rounds(Opts, Ctx, Env),
    stop_processes(Ctx),
    Status.

%% Warm-up rounds (reported only when they fail), then measured rounds
%% interleaved across scenarios, each round starting one scenario further
%% along than the round before; then the summaries, the ENV line and the
%% JSON report. 0 when every round was verified, 1 when one was not, 2 when
%% the JSON report could not be written.
run_rounds(#{scenarios := Scenarios, rounds := Rounds, warmup := Warmup, json := Json},
           Ctx, Env) ->
    WarmupOk = lists:foldl(
                 fun(S, Ok) ->
                         R = run_one(S, Ctx),
                         maps:get(verified, R) orelse print_result(R),
                         Ok andalso maps:get(verified, R)
                 end, true, lists:append(lists:duplicate(Warmup, Scenarios))),
    N = length(Scenarios),
    Order = [lists:nth((I + Round) rem N + 1, Scenarios)
             || Round <- lists:seq(0, Rounds - 1), I <- lists:seq(0, N - 1)],
    Measured = [begin R = run_one(S, Ctx), print_result(R), R end || S <- Order],
    Summaries = [summarize(S, [R || R = #{scenario := S2} <- Measured, S2 =:= S])
                 || S <- Scenarios],
    io:format("ENV~ts~n", [[[" ", K, "=", V] || {K, V} <- Env]]),
    AllOk = WarmupOk andalso lists:all(fun(R) -> maps:get(verified, R) end, Measured),
    Written = case Json of
                  "" -> ok;
                  Path -> write_json(Path, Env, Summaries)
              end,
    case {Written, AllOk} of
        {{error, Why}, _} ->
            io:format(standard_error, "~s: cannot write --json file '~ts': ~ts~n",
                      [?PROGRAM, Json, file:format_error(Why)]),
            2;
        {ok, true} -> 0;
        {ok, false} -> 1
    end.

%% One round of one scenario, with what every arm reports around it.
run_one(Scenario, Ctx) ->
    Before = resident_bytes(),
    R0 = #{scenario => Scenario, ops => 0, seconds => 0.0, latencies => [],
           p50 => 0, p99 => 0, errors => 0, verified => false, failure => "",
           rss_delta => 0, concurrency => 0},
    R = scenario(Scenario, R0, Ctx),
    R1 = R#{rss_delta := resident_bytes() - Before},
    case maps:get(latencies, R1) of
        [] -> R1;
        Samples -> R1#{p50 := nearest_rank(Samples, 0.50), p99 := nearest_rank(Samples, 0.99)}
    end.

scenario("activation", R, Ctx) -> activation(R, Ctx, 100, 100);
scenario("activation_one", R, Ctx) -> activation(R, Ctx, 1, 2000);
scenario("oneway", R, Ctx) -> oneway(R, Ctx);
scenario("oneway_spread", R, Ctx) -> oneway_spread(R, Ctx);
scenario("ask", R, Ctx) -> ask(R, Ctx);
scenario("chain", R, Ctx) -> chain(R, Ctx);
scenario("pingpong", R, Ctx) -> pingpong(R, Ctx);
scenario("fanout", R, Ctx) -> fanout(R, Ctx).

unit("activation") -> "activation";
unit("activation_one") -> "activation";
unit("oneway") -> "message";
unit("oneway_spread") -> "message";
unit("pingpong") -> "exchange";
unit("chain") -> "chain";
unit("fanout") -> "fan-out";
unit(_) -> "call".

%% An operation count scaled as granary-bench scales its own:
%% max(minimum, round(base * scale)).
scaled(Base, Scale, Minimum) -> max(Minimum, round(Base * Scale)).

%% Marks R unverified; the first reason given is the one kept.
fail(R = #{failure := ""}, Why) -> R#{verified := false, failure := lists:flatten(Why)};
fail(R, _Why) -> R#{verified := false}.

fail_if(false, R, _Why) -> R;
fail_if(true, R, Why) -> fail(R, Why).

now_ns() -> erlang:monotonic_time(nanosecond).

seconds_since(T0) -> (now_ns() - T0) / 1.0e9.


%% ---------------------------------------------------------------------------
%% The scenarios. Each fills ops, seconds, latencies (or p50/p99), errors,
%% verified and failure.

%% Batches of Batch fresh processes: spawn and monitor each and send it a
%% first ping; wait for every pong (the sample runs from the spawn to the
%% pong); then stop them all and wait for every 'DOWN'. Verified by the
%% processes' own start count, the pongs and the 'DOWN' messages.
activation(R, #{scale := Scale, started := Started}, Batch, BaseBatches) ->
    Batches = scaled(BaseBatches, Scale, 1),
    Ops = Batches * Batch,
    StartedBefore = counters:get(Started, 1),
    T0 = now_ns(),
    {Samples, Pongs, Downs, Errors, Stuck} =
        activation_batches(Batches, Batch, Started, {[], 0, 0, 0}),
    Seconds = seconds_since(T0),
    Count = counters:get(Started, 1) - StartedBefore,
    R1 = R#{ops := Ops, seconds := Seconds, latencies := Samples, errors := Errors,
            verified := true},
    R2 = fail_if(Stuck, R1, io_lib:format("no reply or 'DOWN' for ~B s (~B pongs, ~B downs)",
                                          [?STUCK_MS div 1000, Pongs, Downs])),
    R3 = fail_if(Count =/= Ops, R2,
                 io_lib:format("~B processes started, expected ~B", [Count, Ops])),
    R4 = fail_if(Pongs =/= Ops, R3,
                 io_lib:format("~B first pings answered, expected ~B", [Pongs, Ops])),
    R5 = fail_if(Downs =/= Ops, R4,
                 io_lib:format("~B 'DOWN' messages, expected ~B", [Downs, Ops])),
    fail_if(Errors > 0, R5, io_lib:format("~B unexpected pongs or exit reasons", [Errors])).

activation_batches(0, _, _, {Samples, Pongs, Downs, Errors}) ->
    {Samples, Pongs, Downs, Errors, false};
activation_batches(Left, Batch, Started, {Samples, Pongs, Downs, Errors}) ->
    Tag = make_ref(),
    Spawned = [begin
                   T = now_ns(),
                   {Pid, _} = spawn_monitor(fun() -> pinger(Started) end),
                   Pid ! {request, self(), {Tag, I}, {ping, I}},
                   {I, T, Pid}
               end || I <- lists:seq(0, Batch - 1)],
    Starts = maps:from_list([{I, T} || {I, T, _} <- Spawned]),
    {PongState, Samples1, Got, Unexpected} = await_pongs(Tag, Starts, Samples, 0),
    Errors1 = Errors + Unexpected,
    case PongState of
        stuck ->
            {Samples1, Pongs + Got, Downs, Errors1, true};
        ok ->
            [exit(Pid, shutdown) || {_, _, Pid} <- Spawned],
            case await_downs(Batch, 0, 0) of
                {ok, Gone, Bad} ->
                    activation_batches(Left - 1, Batch, Started,
                                       {Samples1, Pongs + Got, Downs + Gone, Errors1 + Bad});
                {stuck, Gone, Bad} ->
                    {Samples1, Pongs + Got, Downs + Gone, Errors1 + Bad, true}
            end
    end.

%% Waits for one pong per entry of Starts (seq => spawn time); a pong for an
%% unknown or already answered seq is unexpected.
await_pongs(Tag, Starts, Samples, Unexpected) ->
    await_pongs(Tag, Starts, Samples, 0, Unexpected).

await_pongs(_Tag, Starts, Samples, Got, Unexpected) when map_size(Starts) =:= 0 ->
    {ok, Samples, Got, Unexpected};
await_pongs(Tag, Starts, Samples, Got, Unexpected) ->
    receive
        {reply, {Tag, I}, {pong, Seq}} ->
            case maps:take(I, Starts) of
                {T, Rest} when Seq =:= I ->
                    await_pongs(Tag, Rest, [now_ns() - T | Samples], Got + 1, Unexpected);
                _ ->
                    await_pongs(Tag, Starts, Samples, Got, Unexpected + 1)
            end
    after ?STUCK_MS ->
        {stuck, Samples, Got, Unexpected}
    end.

%% Waits for Left 'DOWN' messages; a reason other than shutdown is bad.
await_downs(0, Gone, Bad) ->
    {ok, Gone, Bad};
await_downs(Left, Gone, Bad) ->
    receive
        {'DOWN', _, process, _, shutdown} -> await_downs(Left - 1, Gone + 1, Bad);
        {'DOWN', _, process, _, _} -> await_downs(Left - 1, Gone + 1, Bad + 1)
    after ?STUCK_MS ->
        {stuck, Gone, Bad}
    end.

%% One-way tells into one counter from the main process, then its tally.
%% Every 16th tell carries its send time, as granary-bench's do.
oneway(R, #{scale := Scale, oneway_target := Counter}) ->
    Ops = scaled(10000, Scale, 100),
    R0 = R#{ops := Ops},
    case call(Counter, {count, true}) of
        stuck -> fail(R0, "could not reset the counter");
        {ok, _} ->
            T0 = now_ns(),
            send_tells(fun(_) -> Counter end, 0, Ops),
            Tally = call(Counter, {count, true}),
            R1 = R0#{seconds := seconds_since(T0), verified := true},
            case Tally of
                stuck -> fail(R1, "count failed: no tally");
                {ok, {tally, Count, Tells, P50, P99}} ->
                    fail_if(Count =/= Ops orelse Tells =/= Ops, R1#{p50 := P50, p99 := P99},
                            io_lib:format("counter counted ~B in ~B tells, expected ~B",
                                          [Count, Tells, Ops]))
            end
    end.

send_tells(_Target, Ops, Ops) ->
    ok;
send_tells(Target, I, Ops) ->
    Sent = case I rem 16 of
               0 -> now_ns();
               _ -> none
           end,
    Target(I) ! {tell, 1, Sent},
    send_tells(Target, I + 1, Ops).

%% One-way tells round-robin over 1,000 counters, then every counter's tally
%% (asked of all at once). p50 is the median of the counters' p50s, p99 the
%% worst p99, as granary-bench reports them.
oneway_spread(R, #{scale := Scale, spread_targets := Targets}) ->
    Ops = scaled(20000, Scale, ?SPREAD_TARGETS),
    R0 = R#{ops := Ops},
    case tally_all(Targets) of
        {stuck, _} -> fail(R0, "could not reset the counters");
        {ok, _} ->
            T0 = now_ns(),
            send_tells(fun(I) -> element(I rem ?SPREAD_TARGETS + 1, Targets) end, 0, Ops),
            Tallies = tally_all(Targets),
            R1 = R0#{seconds := seconds_since(T0), verified := true},
            case Tallies of
                {stuck, Got} ->
                    fail(R1, io_lib:format("only ~B of ~B counters answered",
                                           [length(Got), ?SPREAD_TARGETS]));
                {ok, Got} ->
                    Count = lists:sum([C || {tally, C, _, _, _} <- Got]),
                    Tells = lists:sum([T || {tally, _, T, _, _} <- Got]),
                    P50 = nearest_rank([P || {tally, _, _, P, _} <- Got, P > 0], 0.5),
                    P99 = lists:max([P || {tally, _, _, _, P} <- Got]),
                    fail_if(Count =/= Ops orelse Tells =/= Ops, R1#{p50 := P50, p99 := P99},
                            io_lib:format("counters counted ~B in ~B tells, expected ~B",
                                          [Count, Tells, Ops]))
            end
    end.

%% Asks every counter for its tally (and a reset) at once and gathers the
%% replies.
tally_all(Targets) ->
    Tag = make_ref(),
    [Pid ! {request, self(), Tag, {count, true}} || Pid <- tuple_to_list(Targets)],
    gather(Tag, tuple_size(Targets), []).

gather(_Tag, 0, Got) ->
    {ok, Got};
gather(Tag, Left, Got) ->
    receive
        {reply, Tag, Tally} -> gather(Tag, Left - 1, [Tally | Got])
    after ?STUCK_MS ->
        {stuck, Got}
    end.

%% Sequential requests from the main process.
ask(R, #{scale := Scale, ask_target := Pinger}) ->
    Ops = scaled(5000, Scale, 100),
    T0 = now_ns(),
    {Samples, Errors} = sequential(Ops, fun(I) -> {Pinger, {ping, I}, {pong, I}} end),
    R1 = R#{ops := Ops, concurrency := 1, seconds := seconds_since(T0),
            latencies := Samples, errors := Errors, verified := Errors =:= 0},
    fail_if(Errors > 0, R1, io_lib:format("~B pings failed or mismatched", [Errors])).

%% Sequential requests to the head of a chain of depth + 1 links; each link
%% awaits the next one's reply before it answers.
chain(R, #{scale := Scale, depth := Depth, chain_head := Head}) ->
    Ops = scaled(2000, Scale, 20),
    T0 = now_ns(),
    {Samples, Errors} = sequential(Ops, fun(_) -> {Head, {chain, Depth}, Depth} end),
    R1 = R#{ops := Ops, seconds := seconds_since(T0), latencies := Samples,
            errors := Errors, verified := Errors =:= 0},
    fail_if(Errors > 0, R1, io_lib:format("~B chains failed or fell short of depth ~B",
                                          [Errors, Depth])).

%% Sequential fan-outs: the head pings --fanout leaves at once and answers
%% with the number of replies it gathered.
fanout(R, #{scale := Scale, fanout := Width, fanout_head := Head}) ->
    Ops = scaled(1000, Scale, 10),
    T0 = now_ns(),
    {Samples, Errors} = sequential(Ops, fun(_) -> {Head, {fanout, Width}, Width} end),
    R1 = R#{ops := Ops, seconds := seconds_since(T0), latencies := Samples,
            errors := Errors, verified := Errors =:= 0},
    fail_if(Errors > 0, R1, io_lib:format("~B fan-outs failed or gathered fewer than ~B replies",
                                          [Errors, Width])).

%% Ops requests one after another, each sampled from send to reply;
%% Request(I) gives the callee, the request and the reply expected. A wrong
%% reply is an error; a missing one (the guard) ends the round.
sequential(Ops, Request) ->
    sequential(Ops, Request, 0, [], 0).

sequential(Ops, _Request, Ops, Samples, Errors) ->
    {Samples, Errors};
sequential(Ops, Request, I, Samples, Errors) ->
    {Pid, Body, Expected} = Request(I),
    T = now_ns(),
    case call(Pid, Body) of
        {ok, Expected} ->
            sequential(Ops, Request, I + 1, [now_ns() - T | Samples], Errors);
        {ok, _} ->
            sequential(Ops, Request, I + 1, [now_ns() - T | Samples], Errors + 1);
        stuck ->
            {Samples, Errors + Ops - I}
    end.

%% Volleys of 1,000 one-way balls between two players; a sample is a
%% volley's time divided by its exchanges. Verified by the balls the two
%% players received.
pingpong(R, #{scale := Scale, player_a := A, player_b := B}) ->
    Volleys = scaled(10, Scale, 1),
    Ops = Volleys * ?VOLLEY,
    R0 = R#{ops := Ops},
    case {call(A, {count, true}), call(B, {count, true})} of
        {{ok, _}, {ok, _}} ->
            T0 = now_ns(),
            {Samples, Errors} =
                sequential(Volleys, fun(_) -> {A, {volley, B, ?VOLLEY}, {exchanges, ?VOLLEY}} end),
            Seconds = seconds_since(T0),
            R1 = R0#{seconds := Seconds, latencies := [S div ?VOLLEY || S <- Samples],
                     errors := Errors, verified := true},
            case {call(A, {count, true}), call(B, {count, true})} of
                {{ok, {balls, BallsA}}, {ok, {balls, BallsB}}} ->
                    R2 = fail_if(BallsA + BallsB =/= Ops, R1,
                                 io_lib:format("players received ~B balls, expected ~B",
                                               [BallsA + BallsB, Ops])),
                    fail_if(Errors > 0, R2, io_lib:format("~B volleys failed", [Errors]));
                _ ->
                    fail(R1, "could not read the players' counts")
            end;
        _ ->
            fail(R0, "could not reset the players")
    end.

%% One request and its reply: {ok, Value}, or stuck after the guard.
call(Pid, Body) ->
    Tag = make_ref(),
    Pid ! {request, self(), Tag, Body},
    receive
        {reply, Tag, Value} -> {ok, Value}
    after ?STUCK_MS ->
        stuck
    end.

%% ---------------------------------------------------------------------------
%% The processes. Requests are {request, From, Tag, Body}, answered with
%% From ! {reply, Tag, Value}:
%%   pinger     {ping, Seq}                -> {pong, Seq}
%%   counter    {tell, Amount, SentNs|none}   one-way
%%              {count, Reset}             -> {tally, Count, Tells, P50ns, P99ns}
%%   chain_link {chain, Depth}             -> depth reached below
%%   player     {volley, Peer, Exchanges}  -> {exchanges, Exchanges} once it ends
%%              {ball, Sender, Remaining}     one-way, between players
%%              volley_end                    one-way, to the volley's origin
%%              {count, Reset}             -> {balls, Received}
%%   fanout_head {fanout, Width}           -> replies gathered

start_processes(Opts = #{depth := Depth, fanout := Width}) ->
    Started = counters:new(1, [atomics]),
    Leaves = [spawn(fun() -> pinger(none) end) || _ <- lists:seq(1, Width)],
    %% depth + 1 links, spawned tail first: the head answers Depth, the tail
    %% (which has no successor) 0.
    Links = lists:foldl(fun(_, Below) ->
                                Next = case Below of
                                           [] -> none;
                                           [N | _] -> N
                                       end,
                                [spawn(fun() -> chain_link(Next, #{}) end) | Below]
                        end, [], lists:seq(0, Depth)),
    #{scale => maps:get(scale, Opts), depth => Depth, fanout => Width, started => Started,
      ask_target => spawn(fun() -> pinger(none) end),
      oneway_target => spawn(fun counter/0),
      spread_targets => list_to_tuple([spawn(fun counter/0)
                                       || _ <- lists:seq(1, ?SPREAD_TARGETS)]),
      chain_links => Links, chain_head => hd(Links),
      player_a => spawn(fun player/0), player_b => spawn(fun player/0),
      fanout_leaves => Leaves,
      fanout_head => spawn(fun() -> fanout_head(list_to_tuple(Leaves)) end)}.

stop_processes(Ctx) ->
    Pids = [maps:get(K, Ctx) || K <- [ask_target, oneway_target, player_a, player_b,
                                      fanout_head]]
        ++ tuple_to_list(maps:get(spread_targets, Ctx))
        ++ maps:get(chain_links, Ctx) ++ maps:get(fanout_leaves, Ctx),
    [exit(Pid, shutdown) || Pid <- Pids],
    ok.

%% Answers pings. With a counter, adds one to it as it starts (before its
%% first receive): the activation scenarios' count of processes that started.
pinger(none) ->
    pinger_loop();
pinger(Started) ->
    counters:add(Started, 1, 1),
    pinger_loop().

pinger_loop() ->
    receive
        {request, From, Tag, {ping, Seq}} ->
            From ! {reply, Tag, {pong, Seq}},
            pinger_loop()
    end.

%% Sums one-way tells and samples their delivery latency (tells that carry
%% their send time).
counter() ->
    counter(0, 0, []).

counter(Count, Tells, Latencies) ->
    receive
        {tell, Amount, none} ->
            counter(Count + Amount, Tells + 1, Latencies);
        {tell, Amount, Sent} ->
            counter(Count + Amount, Tells + 1, [now_ns() - Sent | Latencies]);
        {request, From, Tag, {count, Reset}} ->
            From ! {reply, Tag, {tally, Count, Tells, nearest_rank(Latencies, 0.50),
                                 nearest_rank(Latencies, 0.99)}},
            case Reset of
                true -> counter(0, 0, []);
                false -> counter(Count, Tells, Latencies)
            end
    end.

%% One link of a request chain: asks its successor (if any, and Depth > 0)
%% for Depth - 1 with a request of its own, keeps the caller's tag until the
%% reply arrives, and answers one more than it. It never blocks. Pending
%% maps its own request's reference to the caller's {From, Tag}.
chain_link(Next, Pending) ->
    receive
        {request, From, Tag, {chain, Depth}} when Depth =< 0; Next =:= none ->
            From ! {reply, Tag, 0},
            chain_link(Next, Pending);
        {request, From, Tag, {chain, Depth}} ->
            Ref = make_ref(),
            Next ! {request, self(), Ref, {chain, Depth - 1}},
            chain_link(Next, Pending#{Ref => {From, Tag}});
        {reply, Ref, Below} ->
            case maps:take(Ref, Pending) of
                {{From, Tag}, Rest} ->
                    From ! {reply, Tag, Below + 1},
                    chain_link(Next, Rest);
                error ->
                    chain_link(Next, Pending)
            end
    end.

%% One of two ping-pong players. The volley's origin sends the first ball to
%% its peer; each player hits a ball back to its sender until the last ball
%% (Remaining = 0) arrives; the origin then answers the volley request.
player() ->
    player(0, 0, none).

%% Balls received since the last reset, exchanges of the volley in
%% progress, and its requester ({From, Tag}) while this player is its origin.
player(Balls, Volley, Pending) ->
    receive
        {request, From, Tag, {volley, _Peer, Exchanges}} when Exchanges =< 0 ->
            From ! {reply, Tag, {exchanges, 0}},
            player(Balls, Volley, Pending);
        {request, From, Tag, {volley, _Peer, _}} when Pending =/= none ->
            From ! {reply, Tag, {error, "a volley is already in progress"}},
            player(Balls, Volley, Pending);
        {request, From, Tag, {volley, Peer, Exchanges}} ->
            Peer ! {ball, self(), Exchanges - 1},
            player(Balls, Exchanges, {From, Tag});
        {ball, Sender, Remaining} when Remaining > 0 ->
            Sender ! {ball, self(), Remaining - 1},
            player(Balls + 1, Volley, Pending);
        {ball, Sender, _} when Pending =:= none ->
            Sender ! volley_end,
            player(Balls + 1, Volley, Pending);
        {ball, _, _} ->  % the origin took the last ball
            end_volley(Volley, Pending),
            player(Balls + 1, 0, none);
        volley_end ->
            end_volley(Volley, Pending),
            player(Balls, 0, none);
        {request, From, Tag, {count, Reset}} ->
            From ! {reply, Tag, {balls, Balls}},
            player(case Reset of true -> 0; false -> Balls end, Volley, Pending)
    end.

end_volley(_, none) -> ok;
end_volley(Volley, {From, Tag}) -> From ! {reply, Tag, {exchanges, Volley}}.

%% Pings the first Width leaves at once and answers how many replied with the
%% seq they were sent, once all have replied. Gathers in progress are kept by
%% a reference of their own: {From, Tag, Outstanding, Replies}.
fanout_head(Leaves) ->
    fanout_head(Leaves, #{}).

fanout_head(Leaves, Gathers) ->
    receive
        {request, From, Tag, {fanout, Width}} when Width =< 0 ->
            From ! {reply, Tag, 0},
            fanout_head(Leaves, Gathers);
        {request, From, Tag, {fanout, Width}} when Width > tuple_size(Leaves) ->
            From ! {reply, Tag, {error, "fan-out wider than the leaves spawned"}},
            fanout_head(Leaves, Gathers);
        {request, From, Tag, {fanout, Width}} ->
            G = make_ref(),
            [element(I + 1, Leaves) ! {request, self(), {G, I}, {ping, I}}
             || I <- lists:seq(0, Width - 1)],
            fanout_head(Leaves, Gathers#{G => {From, Tag, Width, 0}});
        {reply, {G, I}, {pong, Echoed}} ->
            case Gathers of
                #{G := {From, Tag, Outstanding, Replies}} ->
                    Replies1 = case Echoed =:= I of
                                   true -> Replies + 1;
                                   false -> Replies
                               end,
                    case Outstanding - 1 of
                        0 ->
                            From ! {reply, Tag, Replies1},
                            fanout_head(Leaves, maps:remove(G, Gathers));
                        Left ->
                            fanout_head(Leaves, Gathers#{G := {From, Tag, Left, Replies1}})
                    end;
                _ ->
                    fanout_head(Leaves, Gathers)
            end
    end.

%% ---------------------------------------------------------------------------
%% Reporting: RESULT and SUMMARY lines and the JSON report, as
%% bench/report.cc writes them.

%% The nearest-rank percentile: the smallest sample with at least P of all
%% samples at or below it. 0 for no samples.
nearest_rank([], _P) ->
    0;
nearest_rank(Samples, P) ->
    N = length(Samples),
    Rank = min(N, max(1, ceil(P * N))),
    lists:nth(Rank, lists:sort(Samples)).

print_result(R = #{scenario := S, ops := Ops, seconds := Seconds}) ->
    Rate = case Seconds > 0 of
               true -> Ops / Seconds;
               false -> 0.0
           end,
    io:format("RESULT scenario=~s mode=~s ops=~B seconds=~s rate=~s p50_us=~s p99_us=~s "
              "verified=~s errors=~B rss_delta_kb=~B~s~ts~n",
              [S, ?MODE, Ops, fixed(Seconds, 4), fixed(Rate, 0),
               fixed(maps:get(p50, R) / 1000, 2), fixed(maps:get(p99, R) / 1000, 2),
               maps:get(verified, R), maps:get(errors, R), maps:get(rss_delta, R) div 1024,
               concurrency_field(maps:get(concurrency, R)),
               case maps:get(failure, R) of
                   "" -> "";
                   Why -> [" failure=\"", Why, "\""]
               end]).

concurrency_field(0) -> "";
concurrency_field(K) -> [" concurrency=", integer_to_list(K)].

%% The summary of one scenario's measured rounds (mean and spread of the
%% round rates, pooled nearest-rank p50/p99, ΔRSS, failures); prints its
%% SUMMARY line. Without pooled samples (one-way delivery, measured by the
%% receiver) p50 is the median round p50 and p99 the worst round p99.
summarize(Scenario, Rounds) ->
    Rates = [case Sec > 0 of true -> Ops / Sec; false -> 0.0 end
             || #{ops := Ops, seconds := Sec} <- Rounds],
    Samples = lists:append([L || #{latencies := L} <- Rounds]),
    {P50, P99} = case Samples of
                     [] -> {nearest_rank([P || #{p50 := P} <- Rounds], 0.5),
                            lists:max([0 | [P || #{p99 := P} <- Rounds]])};
                     _ -> {nearest_rank(Samples, 0.5), nearest_rank(Samples, 0.99)}
                 end,
    {Mean, Min, Max, Stddev} = rate_summary(Rates),
    Concurrency = case Rounds of
                      [#{concurrency := K} | _] -> K;
                      [] -> 0
                  end,
    Sum = #{scenario => Scenario,
            rounds => length(Rounds),
            ops => lists:sum([Ops || #{ops := Ops} <- Rounds]),
            mean_rate => Mean, min_rate => Min, max_rate => Max,
            spread_pct => case Mean > 0 of true -> 100 * Stddev / Mean; false -> 0.0 end,
            p50_us => P50 / 1000, p99_us => P99 / 1000,
            samples => length(Samples),
            errors => lists:sum([E || #{errors := E} <- Rounds]),
            rss_delta_kb => lists:sum([B || #{rss_delta := B} <- Rounds]) div 1024,
            verified => Rounds =/= [] andalso lists:all(fun(#{verified := V}) -> V end, Rounds),
            failures => [F || #{failure := F} <- Rounds, F =/= ""],
            concurrency => Concurrency,
            unit => unit(Scenario)},
    io:format("SUMMARY scenario=~s mode=~s rounds=~B ops=~B mean_rate=~s min_rate=~s "
              "max_rate=~s spread_pct=~s p50_us=~s p99_us=~s samples=~B errors=~B "
              "rss_delta_kb=~B verified=~s~s~n",
              [Scenario, ?MODE, length(Rounds), maps:get(ops, Sum), fixed(Mean, 0),
               fixed(Min, 0), fixed(Max, 0), fixed(maps:get(spread_pct, Sum), 1),
               fixed(P50 / 1000, 2), fixed(P99 / 1000, 2), length(Samples),
               maps:get(errors, Sum), maps:get(rss_delta_kb, Sum), maps:get(verified, Sum),
               concurrency_field(Concurrency)]),
    Sum.

%% Mean, minimum, maximum and sample standard deviation of the round rates.
rate_summary([]) ->
    {0.0, 0.0, 0.0, 0.0};
rate_summary(Rates) ->
    N = length(Rates),
    Mean = lists:sum(Rates) / N,
    Var = lists:sum([(R - Mean) * (R - Mean) || R <- Rates]),
    Stddev = case N > 1 of
                 true -> math:sqrt(Var / (N - 1));
                 false -> 0.0
             end,
    {Mean, lists:min(Rates), lists:max(Rates), Stddev}.

%% The resident memory of this VM in bytes (from /proc/self/statm; 0 when it
%% cannot be read).
resident_bytes() ->
    case file:read_file("/proc/self/statm") of
        {ok, Text} ->
            case string:lexemes(binary_to_list(Text), " \n") of
                [_Size, Resident | _] -> list_to_integer(Resident) * page_size();
                _ -> 0
            end;
        {error, _} ->
            0
    end.

page_size() ->
    case get(page_size) of
        undefined ->
            Size = case string:to_integer(os:cmd("getconf PAGESIZE")) of
                       {N, _} when is_integer(N), N > 0 -> N;
                       _ -> 4096
                   end,
            put(page_size, Size),
            Size;
        Size ->
            Size
    end.

%% A number with Decimals digits after the point (printf's %.Nf).
fixed(X, Decimals) -> float_to_list(float(X), [{decimals, Decimals}]).

%% A double as absl::StrCat prints one: integral values without a point.
format_g(X) when X == trunc(X) -> integer_to_list(trunc(X));
format_g(X) -> float_to_list(X, [short]).

%% The BenchReport (bench/report.proto) in protobuf's JSON mapping, with the
%% field names of the .proto and every field present: int64 fields are
%% strings, int32 fields numbers.
write_json(Path, Env, Summaries) ->
    Fields = fun(S) ->
                     [{"scenario", str(maps:get(scenario, S))},
                      {"mode", str(?MODE)},
                      {"rounds", integer_to_list(maps:get(rounds, S))},
                      {"ops", int64(maps:get(ops, S))},
                      {"mean_rate", num(maps:get(mean_rate, S))},
                      {"min_rate", num(maps:get(min_rate, S))},
                      {"max_rate", num(maps:get(max_rate, S))},
                      {"spread_pct", num(maps:get(spread_pct, S))},
                      {"p50_us", num(maps:get(p50_us, S))},
                      {"p99_us", num(maps:get(p99_us, S))},
                      {"samples", int64(maps:get(samples, S))},
                      {"errors", int64(maps:get(errors, S))},
                      {"rss_delta_kb", int64(maps:get(rss_delta_kb, S))},
                      {"verified", atom_to_list(maps:get(verified, S))},
                      {"failures", array([str(F) || F <- maps:get(failures, S)], "   ")},
                      {"concurrency", integer_to_list(maps:get(concurrency, S))},
                      {"unit", str(maps:get(unit, S))}]
             end,
    Json = object([{"arm", str(?MODE)},
                   {"env", object([{K, str(V)} || {K, V} <- Env], " ")},
                   {"summaries", array([object(Fields(S), "  ") || S <- Summaries], " ")}],
                  ""),
    file:write_file(Path, unicode:characters_to_binary([Json, "\n"])).

%% JSON text of an object or array whose members are already JSON text,
%% one member a line, indented one space a level as protobuf prints them.
object(Members, Indent) ->
    Inner = [Indent, " "],
    ["{\n", lists:join(",\n", [[Inner, str(K), ": ", V] || {K, V} <- Members]),
     "\n", Indent, "}"].

array([], _Indent) ->
    "[]";
array(Items, Indent) ->
    Inner = [Indent, " "],
    ["[\n", lists:join(",\n", [[Inner, I] || I <- Items]), "\n", Indent, "]"].

int64(N) -> ["\"", integer_to_list(N), "\""].

num(X) when is_integer(X) -> integer_to_list(X);
num(X) -> float_to_list(X, [short]).

str(Text) -> ["\"", [escape(C) || C <- unicode:characters_to_list(Text)], "\""].

escape($") -> "\\\"";
escape($\\) -> "\\\\";
escape($\n) -> "\\n";
escape($\t) -> "\\t";
escape(C) when C < 16#20 -> io_lib:format("\\u~4.16.0b", [C]);
escape(C) -> C.
