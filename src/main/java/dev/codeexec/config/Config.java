package dev.codeexec.config;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * All configuration, read once from environment variables, validated, then immutable. Every key is in one of
 * {@link #SECTIONS} with its default and description; docs/configuration.md is generated from them.
 */
public final class Config {

    public static final ConfigKey<String> HOST = ConfigKey.string("HOST", "127.0.0.1",
            "Address to bind. A non-loopback address needs API_KEY or API_KEYS_FILE, or ALLOW_UNAUTHENTICATED=true.");
    public static final ConfigKey<Integer> PORT = ConfigKey.integer("PORT", 8080, 0, 65535,
            "HTTP port (0 = any free port, printed at start).");
    public static final ConfigKey<String> TRANSPORT = ConfigKey.oneOf("TRANSPORT", "http",
            "`http` (Streamable HTTP at /mcp plus /healthz) or `stdio` (MCP over stdin/stdout; logs go to stderr).",
            "http", "stdio");
    public static final ConfigKey<String> API_KEY = ConfigKey.string("API_KEY", "",
            "When set, every request except /healthz needs `Authorization: Bearer <key>` (compared in constant time): "
                    + "one tenant, `default`, with admin rights.");
    public static final ConfigKey<Boolean> ALLOW_UNAUTHENTICATED = ConfigKey.bool("ALLOW_UNAUTHENTICATED", false,
            "Allow binding a non-loopback HOST without an API key.");
    public static final ConfigKey<String> CORS_ORIGINS = ConfigKey.string("CORS_ORIGINS", "",
            "Comma-separated browser origins allowed to call /mcp; `*` only when API_KEY or API_KEYS_FILE is set.");
    public static final ConfigKey<String> ALLOWED_HOSTS = ConfigKey.string("ALLOWED_HOSTS", "",
            "Extra Host header names accepted (DNS-rebinding guard); localhost, loopback addresses and HOST always are.");
    public static final ConfigKey<Integer> MAX_BODY_MB = ConfigKey.integer("MAX_BODY_MB", 4, 1, 1024,
            "Largest request body on /mcp; larger gets 413.");
    public static final ConfigKey<Integer> BODY_MEMORY_MB = ConfigKey.integer("BODY_MEMORY_MB", 128, 2, 65536,
            "Request bodies held in memory at once, all requests together (/mcp, /api/execute, REST JSON), from their "
                    + "first byte until answered; a body that would pass it gets 503 with Retry-After. At least 2 x MAX_BODY_MB.");
    public static final ConfigKey<Integer> BODY_TIMEOUT_SECONDS = ConfigKey.integer("BODY_TIMEOUT_SECONDS", 30, 1, 3600,
            "How long a request body read into memory may take to arrive; a slower one gets 408 and its connection is closed.");
    public static final ConfigKey<String> SANDBOX = ConfigKey.oneOf("SANDBOX", "bwrap",
            "`bwrap` (bubblewrap), `gvisor` (runsc) or `none` (no isolation: development only, loudly logged).",
            "bwrap", "gvisor", "none");
    public static final ConfigKey<Integer> SANDBOX_UID = ConfigKey.integer("SANDBOX_UID", 65534, 1, Integer.MAX_VALUE,
            "The uid sandboxed code sees itself as, and the owner of files the server writes into workspaces (never 0); "
                    + "on the host each sandbox runs as a uid of its own from `SANDBOX_UID_RANGE`.");
    public static final ConfigKey<Integer> SANDBOX_GID = ConfigKey.integer("SANDBOX_GID", 65534, 1, Integer.MAX_VALUE,
            "The host gid every sandbox runs as (never 0): the group through which a tenant's later runs use the "
                    + "files an earlier run left in a workspace.");
    public static final ConfigKey<String> SANDBOX_UID_RANGE = ConfigKey.uidRange("SANDBOX_UID_RANGE", "auto",
            "Host uids for sandboxes, one per sandbox at a time (`FIRST-LAST`): the kernel counts epoll watches, "
                    + "inotify instances, pipe buffers and processes per uid, so runs that share one share those limits. "
                    + "`auto`: 2000000000-2000065535 where the server sees every uid (else the top 4096 below 65534 of "
                    + "those it sees); `off`: every sandbox runs as `SANDBOX_UID`.");
    public static final ConfigKey<Integer> MAX_CONCURRENT = ConfigKey.integer("MAX_CONCURRENT", 4, 1, 1024,
            "Runs executing at once.");
    public static final ConfigKey<Integer> QUEUE_SIZE = ConfigKey.integer("QUEUE_SIZE", 64, 0, 100000,
            "Runs that may wait for a slot; one more is refused at once with a clear error.");
    public static final ConfigKey<Integer> QUEUE_TIMEOUT_MS = ConfigKey.integer("QUEUE_TIMEOUT_MS", 30000, 0, 3600000,
            "How long a run may wait for a slot before it is refused.");
    public static final ConfigKey<Integer> DEFAULT_TIMEOUT_MS = ConfigKey.integer("DEFAULT_TIMEOUT_MS", 30000, 100, 3600000,
            "Wall-clock timeout of a run when the call gives none.");
    public static final ConfigKey<Integer> MAX_TIMEOUT_MS = ConfigKey.integer("MAX_TIMEOUT_MS", 120000, 100, 3600000,
            "Largest timeout_ms a call may ask for; more is an error.");
    public static final ConfigKey<Integer> CPU_LIMIT_SECONDS = ConfigKey.integer("CPU_LIMIT_SECONDS", 30, 1, 86400,
            "CPU time per process of a run (RLIMIT_CPU).");
    public static final ConfigKey<Integer> MEMORY_LIMIT_MB = ConfigKey.integer("MEMORY_LIMIT_MB", 2048, 16, 1048576,
            "Memory of a whole run (cgroup v2 or v1; RLIMIT_AS where no cgroup can be used).");
    public static final ConfigKey<Integer> MAX_PROCESSES = ConfigKey.integer("MAX_PROCESSES", 128, 4, 100000,
            "Processes and threads of a whole run (cgroup pids.max).");
    public static final ConfigKey<Integer> MAX_OUTPUT_KB = ConfigKey.integer("MAX_OUTPUT_KB", 256, 1, 1048576,
            "What a result keeps of stdout and of stderr, each: over it, the head and the tail (half each) with a "
                    + "marker `[... N bytes left out ...]`, `truncated: true`; the program runs on and its exit code counts.");
    public static final ConfigKey<Integer> MAX_OUTPUT_DRAIN_MB = ConfigKey.integer("MAX_OUTPUT_DRAIN_MB", 64, 1, 1048576,
            "Output of a run (stdout and stderr together) after which a program that floods without end is stopped: "
                    + "`outcome: output_limit` (a session call is interrupted, the session kept). At least `MAX_OUTPUT_KB`.");
    public static final ConfigKey<Integer> PROGRESS_INTERVAL_MS = ConfigKey.integer("PROGRESS_INTERVAL_MS", 100, 0, 10000,
            "After a progress notification, streamed output is gathered for this long, then sent one notification "
                    + "per line (more than 64 lines: merged per stream switch); 0: sent as read. Each stream streams at most "
                    + "`MAX_OUTPUT_KB`, then one notice.");
    public static final ConfigKey<Integer> MAX_DISK_MB = ConfigKey.integer("MAX_DISK_MB", 512, 1, 1048576,
            "Size of a run's writable working directory and of its /tmp (each a size-capped tmpfs).");
    public static final ConfigKey<String> DATA_DIR = ConfigKey.string("DATA_DIR", "/var/lib/code-exec-mcp",
            "Server state: seccomp filter, shared Go build cache, staging files, the package store. Run by a normal "
                    + "user, the default is `$XDG_DATA_HOME/code-exec-mcp`, else `~/.local/share/code-exec-mcp`. "
                    + "Sandboxed code reaches only what is bound into it read-only (the runner scripts and caches in "
                    + "`runtime/`, the `/etc` whitelist, the Go build cache), whose host paths its mount table shows; "
                    + "nothing else of it.");
    public static final ConfigKey<Integer> SHUTDOWN_GRACE_SECONDS = ConfigKey.integer("SHUTDOWN_GRACE_SECONDS", 10, 0, 3600,
            "On SIGTERM/SIGINT, how long running executions may finish before they are killed.");
    public static final ConfigKey<String> API_KEYS_FILE = ConfigKey.string("API_KEYS_FILE", "",
            "File of tenant keys, one `TENANT SHA256HEX_OF_KEY [admin] [egress=PATTERN,...]` per line (`#` comments); "
                    + "re-read on change ([admin.md](admin.md#tenants-and-keys)).");
    public static final ConfigKey<String> WORKSPACE_ROOT = ConfigKey.string("WORKSPACE_ROOT", "/var/lib/code-exec-mcp/workspaces",
            "Where workspaces live, as `WORKSPACE_ROOT/<tenant>/<workspace>/`. Run by a normal user, the default is "
                    + "`workspaces/` in DATA_DIR.");
    public static final ConfigKey<Integer> WORKSPACE_QUOTA_MB = ConfigKey.integer("WORKSPACE_QUOTA_MB", 1024, 1, 10485760,
            "Size limit of one workspace: API writes over it get 507; code writing past it gets EFBIG/EDQUOT, or is stopped (`workspace_limit`) where the kernel cannot enforce it.");
    public static final ConfigKey<Integer> WORKSPACE_MAX_ENTRIES = ConfigKey.integer("WORKSPACE_MAX_ENTRIES", 50000, 1, 100000000,
            "Files and directories one workspace may hold (each costs the host an inode): API writes over it get 507; code gets EDQUOT under XFS project quotas, else is stopped (`workspace_limit`).");
    public static final ConfigKey<Integer> WORKSPACE_MAX_AGE_HOURS = ConfigKey.integer("WORKSPACE_MAX_AGE_HOURS", 24, 0, 876000,
            "Workspaces idle longer than this are removed (at start and hourly); 0 keeps them.");
    public static final ConfigKey<Integer> MAX_UPLOAD_MB = ConfigKey.integer("MAX_UPLOAD_MB", 100, 1, 1048576,
            "Largest file upload through the REST API (separate from MAX_BODY_MB).");
    public static final ConfigKey<Integer> MAX_IMAGE_KB = ConfigKey.integer("MAX_IMAGE_KB", 1024, 0, 1048576,
            "Images a run creates up to this size come back inline as MCP image content; larger ones as resource links.");
    // The names are the languages table's (languages with a warm interpreter); the engine checks them at start.
    public static final ConfigKey<Map<String, Integer>> WARM_POOL = ConfigKey.counts("WARM_POOL", "python=2,nodejs=1,typescript=1,shell=2,bash=2,c=1,go=1,java=1",
            null, 64,
            "Pre-started single-use sandboxes per language (any language of the table), e.g. `python=2,nodejs=1,go=1`; "
                    + "`off` turns the pool off. Under `SANDBOX=gvisor` only `python`, `nodejs` and `typescript` are kept "
                    + "warm (stateless runs).");
    public static final ConfigKey<List<String>> WARM_PRELOAD_PYTHON = ConfigKey.names("WARM_PRELOAD_PYTHON", "",
            "[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*",
            "Modules a warm python sandbox imports before its code arrives, e.g. `numpy,pandas` (costs memory and refill CPU).");
    public static final ConfigKey<Integer> MAX_JOBS = ConfigKey.integer("MAX_JOBS", 4, 0, 1000,
            "Background jobs (`execute_code` with `background: true`) running at once, server-wide; slots of their own, "
                    + "apart from MAX_CONCURRENT. 0 turns jobs off.");
    public static final ConfigKey<Integer> MAX_JOBS_PER_TENANT = ConfigKey.integer("MAX_JOBS_PER_TENANT", 2, 1, 1000,
            "Background jobs one tenant may have running at once; more wait in the queue.");
    public static final ConfigKey<Integer> JOB_QUEUE_SIZE = ConfigKey.integer("JOB_QUEUE_SIZE", 32, 0, 100000,
            "Background jobs that may wait (`queued`, with their place) for a job slot, all tenants together; past "
                    + "it a new job is refused.");
    public static final ConfigKey<Integer> JOB_MAX_TIMEOUT_MS = ConfigKey.integer("JOB_MAX_TIMEOUT_MS", 3600000, 1000,
            86400000, "Largest timeout_ms of a background job (up to a day), and its default when the call names none.");
    public static final ConfigKey<Integer> JOB_CPU_LIMIT_SECONDS = ConfigKey.integer("JOB_CPU_LIMIT_SECONDS", 0, 0, 86400,
            "CPU time per process of a background job (RLIMIT_CPU); 0: the job's timeout in seconds.");
    public static final ConfigKey<Integer> JOB_LOG_MB = ConfigKey.integer("JOB_LOG_MB", 16, 1, 10240,
            "What a background job keeps of its stdout, and of its stderr, on disk; past it the first and the last "
                    + "half of it, with a marker between.");
    public static final ConfigKey<Integer> JOB_KEEP_PER_TENANT = ConfigKey.integer("JOB_KEEP_PER_TENANT", 50, 1, 100000,
            "Ended background jobs kept per tenant (with their logs, up to twice JOB_LOG_MB each); a new job past it "
                    + "removes the tenant's oldest ended job.");
    public static final ConfigKey<Integer> JOB_RETENTION_HOURS = ConfigKey.integer("JOB_RETENTION_HOURS", 24, 1, 8760,
            "A finished background job and its logs are removed this long after it ended.");
    public static final ConfigKey<Integer> SESSION_IDLE_SECONDS = ConfigKey.integer("SESSION_IDLE_SECONDS", 600, 1, 604800,
            "A session (`execute_code` with `session`) unused this long is closed.");
    public static final ConfigKey<Integer> MAX_SESSIONS = ConfigKey.integer("MAX_SESSIONS", 8, 0, 10000,
            "Sessions one tenant may have open at once; 0 turns sessions off.");
    public static final ConfigKey<Integer> SESSIONS_MEMORY_MB = ConfigKey.integer("SESSIONS_MEMORY_MB", 4096, 16, 1048576,
            "Memory all sessions' interpreters may hold together, every tenant's (each measured from its cgroup, or "
                    + "counted at MEMORY_LIMIT_MB where it cannot be), shared equally by the tenants with sessions: "
                    + "past it the longest-idle sessions of tenants over their share are ended, never one of a tenant "
                    + "within its share, and a tenant at or over its share is refused a new session when nothing "
                    + "else can make room.");
    public static final ConfigKey<String> METRICS_TOKEN = ConfigKey.string("METRICS_TOKEN", "",
            "Bearer token that may read /metrics (besides an admin key), for a Prometheus scraper; never a tenant key. "
                    + "Compared in constant time.");
    public static final ConfigKey<String> WORKERS = ConfigKey.string("WORKERS", "",
            "Gateway mode: run code on gRPC workers instead of here: `dns:///workers.<ns>.svc.cluster.local:30031` "
                    + "(a headless Service) or `static:///h1:30031,h2:30031`. Empty: this server runs code itself. See "
                    + "[cluster.md](cluster.md).");
    public static final ConfigKey<String> WORKER_HOST = ConfigKey.string("WORKER_HOST", "127.0.0.1",
            "Worker (`java -jar code-exec-mcp.jar worker`): address to bind. A non-loopback address needs WORKER_TOKEN.");
    public static final ConfigKey<Integer> WORKER_PORT = ConfigKey.integer("WORKER_PORT", 30031, 0, 65535,
            "Worker: gRPC port (0 = any free port, printed at start).");
    public static final ConfigKey<String> WORKER_TOKEN = ConfigKey.string("WORKER_TOKEN", "",
            "Shared secret between gateways and workers: a worker requires it in every call (constant-time compare); "
                    + "a gateway sends it.");
    public static final ConfigKey<String> WORKER_TLS_CERT = ConfigKey.string("WORKER_TLS_CERT", "",
            "PEM certificate chain: a worker's server certificate; on a gateway, its client certificate for mTLS.");
    public static final ConfigKey<String> WORKER_TLS_KEY = ConfigKey.string("WORKER_TLS_KEY", "",
            "PEM private key (PKCS#8) of WORKER_TLS_CERT.");
    public static final ConfigKey<String> WORKER_TLS_CA = ConfigKey.string("WORKER_TLS_CA", "",
            "PEM CA certificates: on a gateway, the roots that workers' certificates must chain to (TLS to workers); "
                    + "on a worker, when set, clients must present a certificate from them (mTLS).");
    public static final ConfigKey<Boolean> WORKER_PLAINTEXT = ConfigKey.bool("WORKER_PLAINTEXT", false,
            "Allow plaintext gRPC between gateway and workers on non-loopback addresses (e.g. inside a cluster "
                    + "network guarded by a NetworkPolicy). Without it, plaintext is used on loopback only.");
    public static final ConfigKey<String> WORKER_NAME = ConfigKey.string("WORKER_NAME", "",
            "Worker: the name results and the gateway's views show (default: the host name, a pod's name).");
    public static final ConfigKey<String> WORKER_BALANCING = ConfigKey.oneOf("WORKER_BALANCING", "weighted_round_robin",
            "Gateway: how stateless runs spread over healthy workers: `weighted_round_robin` (ORCA load reports) "
                    + "or `least_request`. Sessions always pin by consistent hashing.",
            "weighted_round_robin", "least_request");
    public static final ConfigKey<Integer> WORKER_MAX_CONNECTION_AGE_SECONDS = ConfigKey.integer(
            "WORKER_MAX_CONNECTION_AGE_SECONDS", 30, 1, 86400,
            "Worker: gateways' connections are recycled after this long, which makes gateways re-resolve "
                    + "WORKERS (new pods are found); runs in flight finish on the old connection.");
    public static final ConfigKey<String> EGRESS = ConfigKey.oneOf("EGRESS", "off",
            "`off`: runs have no network at all. `on`: runs may reach the hosts of their allow-list (EGRESS_ALLOW, or "
                    + "the tenant's `egress=` in API_KEYS_FILE) through the server's checking proxy, and nothing else. "
                    + "Needs SANDBOX=bwrap.", "off", "on");
    public static final ConfigKey<String> EGRESS_ALLOW = ConfigKey.string("EGRESS_ALLOW", "",
            "The server's allow-list: comma-separated `host` or `*.suffix` patterns, each optionally `:port` (default "
                    + "ports 80 and 443); `*.example.com` matches names below example.com, not example.com itself. "
                    + "Every tenant's list unless its key line carries its own `egress=`.");
    public static final ConfigKey<String> EGRESS_ALLOW_CIDRS = ConfigKey.string("EGRESS_ALLOW_CIDRS", "",
            "Address blocks the proxy may connect to although they are loopback, private, link-local, CGNAT, ULA, "
                    + "multicast or metadata addresses (refused otherwise): an on-prem mirror, `10.1.2.0/24`.");
    public static final ConfigKey<String> EGRESS_RESOLVE = ConfigKey.string("EGRESS_RESOLVE", "",
            "Names the proxy answers itself instead of asking the host's resolver, `name=address,...` (tests, "
                    + "on-prem names); the address rules still apply.");
    public static final ConfigKey<Integer> EGRESS_MAX_CONNECTIONS = ConfigKey.integer("EGRESS_MAX_CONNECTIONS", 32, 1, 4096,
            "Connections one run may have open through the proxy at once; more are refused (HTTP 429, or closed at "
                    + "once past 128 waiting for that answer).");
    public static final ConfigKey<Integer> EGRESS_MAX_MB = ConfigKey.integer("EGRESS_MAX_MB", 1024, 1, 1048576,
            "MiB one run may transfer through the proxy in each direction; the connection that goes over is closed.");
    public static final ConfigKey<Integer> EGRESS_CONNECT_TIMEOUT_MS = ConfigKey.integer("EGRESS_CONNECT_TIMEOUT_MS", 10000, 100, 600000,
            "How long the proxy waits for an allowed host to accept a connection.");
    public static final ConfigKey<Integer> EGRESS_IDLE_TIMEOUT_MS = ConfigKey.integer("EGRESS_IDLE_TIMEOUT_MS", 60000, 1000, 3600000,
            "A proxied connection with no data either way for this long is closed.");
    public static final ConfigKey<String> EGRESS_CA_FILE = ConfigKey.string("EGRESS_CA_FILE", "",
            "PEM certificates that runs with network access trust besides the system's (a TLS-inspecting "
                    + "corporate proxy, an internal mirror): set through SSL_CERT_FILE, NODE_EXTRA_CA_CERTS and the like.");
    public static final ConfigKey<String> EGRESS_SECRETS_FILE = ConfigKey.string("EGRESS_SECRETS_FILE", "",
            "Placeholder secrets: a JSON file `{\"NAME\": {\"value\": \"${VAR}\", \"hosts\": [...], \"tenants\": [...]}}` "
                    + "(`${VAR}` from the server's environment). A run whose allow-list reaches one of a secret's hosts gets "
                    + "`NAME` set to a placeholder of its own; the proxy puts the real value in its place on the way to "
                    + "those hosts only ([network.md](network.md#placeholder-secrets)); runtime_info lists each caller's. "
                    + "Needs EGRESS=on. Behind a gateway: on the workers with the values' variables, and on the gateway, "
                    + "which reads it for names and hosts only (it needs none of the variables).");
    public static final ConfigKey<String> EGRESS_UPSTREAM_CA_FILE = ConfigKey.string("EGRESS_UPSTREAM_CA_FILE", "",
            "Placeholder secrets: PEM certificates the proxy trusts besides the system's when it connects to a "
                    + "secret's host itself (an internal API with a private CA).");
    public static final ConfigKey<String> UPSTREAM_MCP_FILE = ConfigKey.string("UPSTREAM_MCP_FILE", "",
            "Code mode: a JSON file of upstream MCP servers (`{\"mcpServers\": {...}}`, the desktop clients' format, "
                    + "`${VAR}` from the server's environment) whose tools sandboxed code may call through `mcp_tools` "
                    + "(Python) / `mcp-tools` (Node, TypeScript). Empty: no code mode.");
    public static final ConfigKey<Integer> CODE_TOOLS_MAX_CALLS = ConfigKey.integer("CODE_TOOLS_MAX_CALLS", 100, 1, 1000000,
            "Code mode: tool calls one run may make.");
    public static final ConfigKey<Integer> CODE_TOOLS_MAX_MB = ConfigKey.integer("CODE_TOOLS_MAX_MB", 16, 1, 4096,
            "Code mode: MiB of tool call data (arguments and answers together) one run may move.");
    public static final ConfigKey<Integer> CODE_TOOLS_CALL_TIMEOUT_MS = ConfigKey.integer("CODE_TOOLS_CALL_TIMEOUT_MS", 30000, 100, 3600000,
            "Code mode: how long one tool call may take upstream before it is cancelled and fails with `timeout`.");
    public static final ConfigKey<String> PACKAGES = ConfigKey.oneOf("PACKAGES", "on",
            "`on`: `execute_code` takes `packages` (pip requirements for python, npm packages for nodejs/typescript), "
                    + "installed once per set in a sandbox that reaches only the package index, kept read-only in the "
                    + "store and mounted into every run that declares the same set. `off`: `packages` is refused. "
                    + "Needs SANDBOX=bwrap.", "on", "off");
    public static final ConfigKey<String> PACKAGE_INDEX_PYTHON = ConfigKey.string("PACKAGE_INDEX_PYTHON",
            "https://pypi.org/simple/",
            "The PEP 503 simple index pip installs from (wheels only). Installs may reach its host, plus "
                    + "files.pythonhosted.org for the default index, plus PACKAGE_INDEX_HOSTS. An `http://` index (a "
                    + "mirror on your network) is trusted as configured.");
    public static final ConfigKey<String> PACKAGE_REGISTRY_NPM = ConfigKey.string("PACKAGE_REGISTRY_NPM",
            "https://registry.npmjs.org/",
            "The npm registry npm installs from. Installs may reach its host, plus PACKAGE_INDEX_HOSTS.");
    public static final ConfigKey<String> PACKAGE_INDEX_HOSTS = ConfigKey.string("PACKAGE_INDEX_HOSTS", "",
            "More hosts an install may reach (comma-separated `host[:port]` patterns, as in EGRESS_ALLOW): where a "
                    + "mirror serves its files from another host than its index.");
    public static final ConfigKey<Integer> PACKAGE_STORE_MB = ConfigKey.integer("PACKAGE_STORE_MB", 4096, 1, 16777216,
            "MiB the package store (DATA_DIR/packages) may hold; past it the least recently used sets go first, never "
                    + "one a run or session is using.");
    public static final ConfigKey<Integer> INSTALL_TIMEOUT_MS = ConfigKey.integer("INSTALL_TIMEOUT_MS", 300000, 1000, 3600000,
            "How long one install of a package set may take; the run that asked ends with `failed_to_start`. A "
                    + "gateway adds it to the deadline of a call with packages: give gateway and workers the same value.");
    public static final ConfigKey<Integer> INSTALL_DISK_MB = ConfigKey.integer("INSTALL_DISK_MB", 2048, 1, 1048576,
            "MiB one install may write (what it downloads and unpacks); over it the install is stopped and fails.");
    public static final ConfigKey<String> LOG_FORMAT = ConfigKey.oneOf("LOG_FORMAT", "text",
            "`text` or `json` (one JSON object per line). Logs always go to stderr.", "text", "json");
    public static final ConfigKey<String> PREVIEWS = ConfigKey.oneOf("PREVIEWS", "on",
            "`on`: expose_port can make a session's or a background job's server reachable through the preview listener "
                    + "(PREVIEW_HOST:PREVIEW_PORT); `off`: no listener, expose_port says so.", "on", "off");
    public static final ConfigKey<String> PREVIEW_HOST = ConfigKey.string("PREVIEW_HOST", "127.0.0.1",
            "Address of the preview listener. A non-loopback address needs API_KEY or API_KEYS_FILE, or "
                    + "ALLOW_UNAUTHENTICATED=true, as HOST does.");
    public static final ConfigKey<Integer> PREVIEW_PORT = ConfigKey.integer("PREVIEW_PORT", 8081, 0, 65535,
            "Port of the preview listener, an origin of its own (0 = any free port). A port in use leaves previews off "
                    + "with a warning; the server starts all the same.");
    public static final ConfigKey<String> PREVIEW_DOMAIN = ConfigKey.string("PREVIEW_DOMAIN", "",
            "When set (`preview.example.com`, with wildcard DNS and TLS at the operator's reverse proxy in front of the "
                    + "preview listener), preview URLs are `https://{token}.PREVIEW_DOMAIN/`: one origin per preview.");
    public static final ConfigKey<String> PREVIEW_PUBLIC_URL = ConfigKey.string("PREVIEW_PUBLIC_URL", "",
            "The preview listener's address as clients reach it (`http://host:8081`), for URLs of the path form "
                    + "`{PREVIEW_PUBLIC_URL}/p/{token}/`; default: http://PREVIEW_HOST:PREVIEW_PORT.");
    public static final ConfigKey<Integer> PREVIEW_MAX_CONNECTIONS = ConfigKey.integer("PREVIEW_MAX_CONNECTIONS", 32, 1, 10000,
            "Client connections one preview serves at once; more get 503.");
    public static final ConfigKey<Integer> PREVIEW_MAX_BODY_MB = ConfigKey.integer("PREVIEW_MAX_BODY_MB", 16, 1, 1024,
            "Largest request body a preview passes on; larger gets 413.");
    public static final ConfigKey<Integer> PREVIEW_MAX_MB = ConfigKey.integer("PREVIEW_MAX_MB", 512, 1, 1048576,
            "Bytes one preview connection may carry each way; past it the connection is closed.");
    public static final ConfigKey<Integer> PREVIEW_IDLE_TIMEOUT_MS = ConfigKey.integer("PREVIEW_IDLE_TIMEOUT_MS", 120000, 1000, 3600000,
            "A preview connection (a WebSocket too) that carries nothing either way this long is closed.");
    public static final ConfigKey<Integer> PREVIEW_MAX_AGE_HOURS = ConfigKey.integer("PREVIEW_MAX_AGE_HOURS", 24, 1, 8760,
            "A preview ends this long after it was made (expiresAt), or with its session or job, whichever is first.");
    public static final ConfigKey<Integer> PREVIEW_MAX_PER_SANDBOX = ConfigKey.integer("PREVIEW_MAX_PER_SANDBOX", 8, 1, 100,
            "Previews one session or job may have at once.");

    public static final ConfigKey<String> LLM_MODEL = ConfigKey.string("LLM_MODEL", "",
            "The chat agent's model (`gpt-4.1`, `claude-sonnet-4-5`, `qwen2.5-coder:14b`, ...). Empty: the chat is off "
                    + "and `/api/chat` says so.");
    public static final ConfigKey<String> LLM_PROVIDER = ConfigKey.oneOf("LLM_PROVIDER", "openai",
            "The model's API: `openai` (Chat Completions: OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server, "
                    + "LM Studio) or `anthropic` (Messages).", "openai", "anthropic");
    public static final ConfigKey<String> LLM_BASE_URL = ConfigKey.string("LLM_BASE_URL", "",
            "The model API's base URL (`http://127.0.0.1:11434/v1` for Ollama); empty: the provider's own "
                    + "(https://api.openai.com/v1, https://api.anthropic.com/v1).");
    public static final ConfigKey<String> LLM_API_KEY = ConfigKey.string("LLM_API_KEY", "",
            "The model API's key; sent only to LLM_BASE_URL, never to a browser, a sandbox or a log line.");
    public static final ConfigKey<Integer> LLM_MAX_ROUNDS = ConfigKey.integer("LLM_MAX_ROUNDS", 10, 1, 100,
            "Model calls one chat answer may make (each with the tool calls it asks for).");
    public static final ConfigKey<Integer> LLM_MAX_TOKENS = ConfigKey.integer("LLM_MAX_TOKENS", 4096, 1, 1000000,
            "The most tokens one model call may write.");
    public static final ConfigKey<Integer> LLM_TIMEOUT_MS = ConfigKey.integer("LLM_TIMEOUT_MS", 120000, 100, 3600000,
            "How long one model call may take.");
    public static final ConfigKey<Integer> CHAT_MAX_CONVERSATIONS = ConfigKey.integer("CHAT_MAX_CONVERSATIONS", 50, 1, 100000,
            "Chat conversations kept per tenant; a new one past it removes the tenant's least recently used.");
    public static final ConfigKey<Integer> CHAT_CONVERSATION_MAX_KB = ConfigKey.integer("CHAT_CONVERSATION_MAX_KB", 512, 16, 1048576,
            "The most a conversation keeps of its history for the model and, apart, of its turns for display; past it the "
                    + "oldest turns are left out (and the model is told so).");
    public static final ConfigKey<Integer> CHAT_CONVERSATION_IDLE_HOURS = ConfigKey.integer("CHAT_CONVERSATION_IDLE_HOURS", 24, 1, 8760,
            "A conversation unused this long is removed (at the next chat request of any tenant).");

    public static final ConfigKey<String> LOG_LEVEL = ConfigKey.oneOf("LOG_LEVEL", "info",
            "`debug`, `info`, `warn` or `error`.", "debug", "info", "warn", "error");

    /**
     * Every key, grouped: the configuration reference, docs/configuration.md, is generated from this list
     * ({@code ConfigReferenceTest} fails when the file differs). A new key goes into one section here, or it is not
     * read at all.
     */
    public static final List<ConfigSection> SECTIONS = List.of(
            new ConfigSection("Server", "Where the server listens, where it keeps its state, how it stops and logs.",
                    List.of(HOST, PORT, TRANSPORT, DATA_DIR, SHUTDOWN_GRACE_SECONDS, LOG_FORMAT, LOG_LEVEL)),
            new ConfigSection("Keys and the HTTP edge", "Who may call, and what the edge accepts "
                    + "([http-api.md](http-api.md), [admin.md](admin.md#tenants-and-keys), "
                    + "[security.md](security.md#the-http-edge)).",
                    List.of(API_KEY, API_KEYS_FILE, METRICS_TOKEN, ALLOW_UNAUTHENTICATED, CORS_ORIGINS, ALLOWED_HOSTS,
                            MAX_BODY_MB, BODY_MEMORY_MB, BODY_TIMEOUT_SECONDS)),
            new ConfigSection("Sandbox", "How every run is isolated ([security.md](security.md#the-sandbox)).",
                    List.of(SANDBOX, SANDBOX_UID, SANDBOX_GID, SANDBOX_UID_RANGE)),
            new ConfigSection("Runs: slots, queue and limits", "How many runs execute at once, and what one run may "
                    + "use ([architecture.md](architecture.md#where-each-limit-is-enforced) says where each limit is "
                    + "enforced).",
                    List.of(MAX_CONCURRENT, QUEUE_SIZE, QUEUE_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS,
                            CPU_LIMIT_SECONDS, MEMORY_LIMIT_MB, MAX_PROCESSES, MAX_DISK_MB, MAX_OUTPUT_KB,
                            MAX_OUTPUT_DRAIN_MB, PROGRESS_INTERVAL_MS, MAX_IMAGE_KB)),
            new ConfigSection("Workspaces", "Persistent per-tenant working directories "
                    + "([tools.md](tools.md#workspaces-and-files)).",
                    List.of(WORKSPACE_ROOT, WORKSPACE_QUOTA_MB, WORKSPACE_MAX_ENTRIES, WORKSPACE_MAX_AGE_HOURS,
                            MAX_UPLOAD_MB)),
            new ConfigSection("Warm pool and sessions", "Sandboxes started ahead of their runs "
                    + "([warm-pool.md](warm-pool.md)) and interpreters that keep their state between calls "
                    + "([sessions.md](sessions.md)).",
                    List.of(WARM_POOL, WARM_PRELOAD_PYTHON, SESSION_IDLE_SECONDS, MAX_SESSIONS, SESSIONS_MEMORY_MB)),
            new ConfigSection("Background jobs", "Runs that outlive the call that started them, watched, awaited "
                    + "and collected later ([jobs.md](jobs.md)).",
                    List.of(MAX_JOBS, MAX_JOBS_PER_TENANT, JOB_QUEUE_SIZE, JOB_MAX_TIMEOUT_MS, JOB_CPU_LIMIT_SECONDS,
                            JOB_LOG_MB, JOB_KEEP_PER_TENANT, JOB_RETENTION_HOURS)),
            new ConfigSection("Port previews", "A server a session or a background job starts, reachable through "
                    + "the server on an origin of its own ([previews.md](previews.md)).",
                    List.of(PREVIEWS, PREVIEW_HOST, PREVIEW_PORT, PREVIEW_DOMAIN, PREVIEW_PUBLIC_URL,
                            PREVIEW_MAX_CONNECTIONS, PREVIEW_MAX_BODY_MB, PREVIEW_MAX_MB, PREVIEW_IDLE_TIMEOUT_MS,
                            PREVIEW_MAX_AGE_HOURS, PREVIEW_MAX_PER_SANDBOX)),
            new ConfigSection("Network access", "Runs reach the hosts of an allow-list through the server's checking "
                    + "proxy, and nothing else ([network.md](network.md)).",
                    List.of(EGRESS, EGRESS_ALLOW, EGRESS_ALLOW_CIDRS, EGRESS_RESOLVE, EGRESS_MAX_CONNECTIONS,
                            EGRESS_MAX_MB, EGRESS_CONNECT_TIMEOUT_MS, EGRESS_IDLE_TIMEOUT_MS, EGRESS_CA_FILE,
                            EGRESS_SECRETS_FILE, EGRESS_UPSTREAM_CA_FILE)),
            new ConfigSection("Code mode", "Sandboxed code that calls upstream MCP servers' tools "
                    + "([code-mode.md](code-mode.md)).",
                    List.of(UPSTREAM_MCP_FILE, CODE_TOOLS_MAX_CALLS, CODE_TOOLS_MAX_MB, CODE_TOOLS_CALL_TIMEOUT_MS)),
            new ConfigSection("Chat agent", "The built-in agent over this server's tools, and the model it talks to "
                    + "([chat.md](chat.md)).",
                    List.of(LLM_MODEL, LLM_PROVIDER, LLM_BASE_URL, LLM_API_KEY, LLM_MAX_ROUNDS, LLM_MAX_TOKENS,
                            LLM_TIMEOUT_MS, CHAT_MAX_CONVERSATIONS, CHAT_CONVERSATION_MAX_KB,
                            CHAT_CONVERSATION_IDLE_HOURS)),
            new ConfigSection("Declared packages", "pip and npm packages a run declares, installed once per set and "
                    + "shared read-only ([packages.md](packages.md)).",
                    List.of(PACKAGES, PACKAGE_INDEX_PYTHON, PACKAGE_REGISTRY_NPM, PACKAGE_INDEX_HOSTS,
                            PACKAGE_STORE_MB, INSTALL_TIMEOUT_MS, INSTALL_DISK_MB)),
            new ConfigSection("Gateway and workers", "The same jar as a gateway in front of gRPC workers "
                    + "([cluster.md](cluster.md)).",
                    List.of(WORKERS, WORKER_HOST, WORKER_PORT, WORKER_TOKEN, WORKER_TLS_CERT, WORKER_TLS_KEY,
                            WORKER_TLS_CA, WORKER_PLAINTEXT, WORKER_NAME, WORKER_BALANCING,
                            WORKER_MAX_CONNECTION_AGE_SECONDS)));

    /** Every key, in the order of {@link #SECTIONS}. */
    public static final List<ConfigKey<?>> KEYS = SECTIONS.stream().<ConfigKey<?>>flatMap(s -> s.keys().stream()).toList();

    private final Map<ConfigKey<?>, Object> values;

    private Config(Map<ConfigKey<?>, Object> values) {
        this.values = values;
    }

    /** Reads every key from the given environment; the first bad value stops with a message naming the key. */
    public static Config load(Map<String, String> env) {
        return load(env, UserDefaults.runningAsRoot());
    }

    /** @param root whether the server runs as root: a normal user's defaults put state under its own data directory */
    static Config load(Map<String, String> given, boolean root) {
        Map<String, String> env = root ? given : UserDefaults.apply(given);
        Map<ConfigKey<?>, Object> values = new HashMap<>();
        for (ConfigKey<?> key : KEYS) {
            String raw = env.getOrDefault(key.name(), key.defaultValue());
            if (raw == null || raw.isBlank()) raw = key.defaultValue();
            try {
                values.put(key, key.parser().apply(raw));
            } catch (IllegalArgumentException e) {
                throw new ConfigException(key.name() + " " + e.getMessage());
            }
        }
        Config c = new Config(values);
        c.checkCombinations();
        return c;
    }

    /** Defaults overridden by the given pairs (tests). */
    public static Config of(String... pairs) {
        Map<String, String> env = new HashMap<>();
        for (int i = 0; i + 1 < pairs.length; i += 2) env.put(pairs[i], pairs[i + 1]);
        return load(env);
    }

    private void checkCombinations() {
        if (get(DEFAULT_TIMEOUT_MS) > get(MAX_TIMEOUT_MS))
            throw new ConfigException("DEFAULT_TIMEOUT_MS must not exceed MAX_TIMEOUT_MS");
        if (get(BODY_MEMORY_MB) < 2L * get(MAX_BODY_MB))
            throw new ConfigException("BODY_MEMORY_MB (" + get(BODY_MEMORY_MB) + ") must be at least 2 x MAX_BODY_MB ("
                    + get(MAX_BODY_MB) + "), or the largest body allowed could not be read");
        if (corsOrigins().contains("*") && !hasKeys())
            throw new ConfigException("CORS_ORIGINS '*' is only allowed when API_KEY or API_KEYS_FILE is set");
        if (!isLoopback(get(HOST)) && !hasKeys() && !get(ALLOW_UNAUTHENTICATED))
            throw new ConfigException("HOST " + get(HOST) + " is not a loopback address: set API_KEY or API_KEYS_FILE, or ALLOW_UNAUTHENTICATED=true to expose the server without authentication");
    }

    /**
     * The HTTP server's preview listener binds like HOST: a non-loopback PREVIEW_HOST needs API_KEY or API_KEYS_FILE,
     * or ALLOW_UNAUTHENTICATED. Checked where a listener is started (the HTTP server), not by a worker or a stdio
     * server, which serve no previews (the image's PREVIEW_HOST=0.0.0.0 must not stop a worker).
     *
     * @throws ConfigException the combination is refused
     */
    public void checkPreviewHost() {
        if (get(PREVIEWS).equals("on") && !isLoopback(get(PREVIEW_HOST)) && !hasKeys() && !get(ALLOW_UNAUTHENTICATED))
            throw new ConfigException("PREVIEW_HOST " + get(PREVIEW_HOST) + " is not a loopback address: set API_KEY or API_KEYS_FILE, or ALLOW_UNAUTHENTICATED=true to expose previews without authentication");
    }

    /**
     * Loopback by its spelling alone: {@code localhost}, an IPv4 literal in 127.0.0.0/8, or {@code ::1}. A host name
     * that merely starts with "127." ({@code 127.example.com}) is not, whatever it resolves to.
     */
    public static boolean isLoopback(String host) {
        String h = host.trim().toLowerCase();
        return h.equals("localhost") || h.matches("127\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}") || h.equals("::1")
                || h.equals("[::1]");
    }

    @SuppressWarnings("unchecked")
    public <T> T get(ConfigKey<T> key) {
        return (T) values.get(key);
    }

    public String apiKey() {
        return get(API_KEY);
    }

    /** Whether requests must authenticate: API_KEY or API_KEYS_FILE (or both) is set. */
    public boolean hasKeys() {
        return !apiKey().isEmpty() || !get(API_KEYS_FILE).isEmpty();
    }

    public List<String> corsOrigins() {
        return split(get(CORS_ORIGINS));
    }

    public List<String> allowedHosts() {
        return split(get(ALLOWED_HOSTS));
    }

    public Path dataDir() {
        return Path.of(get(DATA_DIR));
    }

    public Duration maxTimeout() {
        return Duration.ofMillis(get(MAX_TIMEOUT_MS));
    }

    private static List<String> split(String s) {
        return Arrays.stream(s.split(",")).map(String::trim).filter(x -> !x.isEmpty()).toList();
    }
}
