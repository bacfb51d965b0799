"""Runtime configuration: one object, built once, passed down."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from flowmem.docstrings import attribute_descriptions
from flowmem.models import NAMESPACE_PATTERN
from flowmem.policy.scrub import DEFAULT_SCRUB, ScrubKind

if TYPE_CHECKING:  # imported when asked for: the clustering module loads numpy, agents need neither
    from flowmem.induction.cluster.cluster import ClusterParams

__all__ = ["EMBEDDER_FLOORS", "Settings"]

DASK_ADDRESS = r"^(local:[1-9][0-9]*|[a-z][a-z0-9+]*://[^\s/]+)$"

EMBEDDER_FLOORS: dict[str, float] = {"hashing": 0.40, "static": 0.59, "openai": 0.0}
"""Each embedder's default relevance floor: the cosine that requests from no known domain
reach against stored tasks through what any two English requests share (function words,
"what is the ... in ... tomorrow"), just above the highest measured. `bench/relevance_floor.py`:
25 such requests against four stores of three domains (the demo's office, WorkBench, tau2's
customer service): at most 0.399 with the hashing embedder (384 dimensions), 0.586 with the
static one (docs/induction.md, "A relevance floor"). The OpenAI embedder's range is not
measured offline: no floor until one is set."""
"""A Dask scheduler address (`tcp://10.0.0.5:8786`, `tls://...`), or `local:N` (N worker processes)."""


class Settings(BaseSettings):
    """Runtime configuration; every field can be set as FLOWMEM_<FIELD> (e.g. FLOWMEM_DB)."""

    model_config = SettingsConfigDict(
        env_prefix="FLOWMEM_",
        env_file=".env",
        extra="ignore",
        frozen=True,
        json_schema_extra=attribute_descriptions,
    )

    db: str = "./.flowmem/db"
    """LanceDB URI of the store: a directory path (or an object-store URI such as s3://...)."""
    namespace: str = Field("default", pattern=NAMESPACE_PATTERN)
    """Tenant or project whose trajectories and workflows every command works on."""
    # Object storage (FLOWMEM_DB=s3://bucket/prefix; docs/operations.md, "Object storage (S3)").
    # A field left unset is taken from the standard AWS environment (AWS_ACCESS_KEY_ID,
    # AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION or AWS_DEFAULT_REGION, AWS_ENDPOINT_URL,
    # AWS_ALLOW_HTTP), which Lance reads itself; `flowmem.storage.object_store` passes these on.
    s3_endpoint: str | None = None
    """Endpoint URL of an S3-compatible server (MinIO, a local test server); None: AWS's own."""
    s3_region: str | None = None
    """Region of the bucket, e.g. us-east-1."""
    s3_access_key_id: str | None = None
    """Access key id of the credentials."""
    s3_secret_access_key: SecretStr | None = None
    """Secret access key of the credentials."""
    s3_session_token: SecretStr | None = None
    """Session token of temporary credentials."""
    s3_allow_http: bool = False
    """Allow a plain-http endpoint (a local test server; never for a remote one)."""
    storage_options: dict[str, str] = Field(default_factory=dict)
    """Further Lance object-store options, passed as given (for example
    `{"aws_virtual_hosted_style_request": "true"}`, or a `gs://` / `az://` store's own keys);
    the fields above win over the same keys here. Put no secret here: it is not masked."""
    # Bounds of every object-store request Lance makes for flowmem (any object-store scheme);
    # a key of the same name in `storage_options` wins over them.
    storage_connect_timeout: float = Field(5.0, gt=0, le=600)
    """Seconds to open a connection to the object store (Lance's `connect_timeout`); flowmem
    also gives up at once when a TCP connection to an explicit endpoint cannot be opened within it."""
    storage_timeout: float = Field(30.0, gt=0, le=3600)
    """Seconds one object-store request may take, connection to last byte (Lance's `timeout`)."""
    storage_retries: int = Field(2, ge=0, le=20)
    """Retries of a failed object-store request (connection errors, timeouts, 5xx, 429), with
    backoff (Lance's `client_max_retries`; Lance's own default is 10)."""
    storage_retry_timeout: float = Field(20.0, gt=0, le=3600)
    """Seconds after a request's first try past which it is not retried again (Lance's
    `client_retry_timeout`; Lance's own default is 180)."""

    quarantine: str | None = None
    """JSONL file that receives rejected input lines; default: `<db>.quarantine.jsonl`."""

    spool: str | None = None
    """Directory where recording hooks of other processes leave JSONL files for the collect
    flow; default: `<db>.spool`."""
    ann_cache: str | None = None
    """Directory where the HNSW indexes search builds of a store's keys and stored tasks
    (past 5,000 of them) are kept for the next process that opens it, which reads one (~0.2 s
    at 100k) instead of building it (20–50 s of both cores, searching every key meanwhile);
    default: `<db>.ann`, or `.flowmem/ann` for an object-store URI (`agents.ann_cache`)."""
    ann_cache_mb: int = Field(2_000, ge=0)
    """Megabytes of those indexes kept at most (~65 MB for 100k keys), the least recently used
    removed past it; 0: none kept, each process builds its own."""
    keep_built_mb: int = Field(64, ge=0)
    """Megabytes of served versions a searching process keeps built as `Workflow`s, the most
    served first (an estimate from their text: `retrieval.built`), built in a background thread
    after each load: a search serving one of them builds nothing (at 10k served versions, p50
    0.32 and 0.39 ms against 0.58 and 0.63 ms with 0, two pairs of `python -m bench search
    10000` on a 2-core Xeon: docs/performance.md). 0: only the last 1,024 searches' hits are
    kept."""
    import_paths: list[str] = Field(default_factory=list)
    """Files or glob patterns the collect flow ingests on every run (idempotent)."""
    record_to: Literal["store", "spool"] = "store"
    """Where `WorkflowMemory` writes finished runs: straight to the store, or to the spool
    (for many agent processes; the collect flow brings them in)."""

    # Embeddings.
    embedder: Literal["hashing", "openai", "static"] = "hashing"
    """`hashing`: the offline, stateless, deterministic default; `openai`: embeddings from the
    OpenAI-compatible endpoint of `llm_base_url` (cached by content hash in the store);
    `static`: the model2vec static model in `embedder_path`, offline (docs/usage.md)."""
    embedding_dim: int = Field(384, ge=8, le=8192)
    """Vector size of the hashing embedder."""
    embedding_model: str = "text-embedding-3-small"
    """Model of the `openai` embedder."""
    embedder_path: str | None = Field(None, validate_default=True)
    """Directory of the `static` embedder's model (`model.safetensors`, `tokenizer.json`), as
    model2vec's `save_pretrained` writes it; required by `static`, checked whenever set."""

    # LLM (optional: without one, the rule-based inducer is used).
    llm_model: str | None = None
    """Chat model for the LLM inducer; None selects the rule-based inducer."""
    llm_base_url: str | None = None
    """Base URL of an OpenAI-compatible endpoint (None: the OpenAI default)."""
    llm_api_key: SecretStr | None = None
    """API key for the LLM and embedding endpoints."""
    llm_temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature of the LLM inducer."""
    llm_timeout: float = Field(60.0, gt=0.0)
    """Seconds one LLM or embedding request may take."""
    llm_max_retries: int = Field(2, ge=0, le=10)
    """Retries of a failed LLM request (timeouts, 429 after its Retry-After, 5xx), by the client."""
    llm_check_timeout: float = Field(3.0, gt=0.0, le=600.0)
    """Seconds a command that induces with the LLM waits, before any call, for the endpoint to
    describe the model (`flowmem.providers.openai.check_llm`): past it, the endpoint does not
    answer, said in one line (a live server answers that request at once)."""

    # Induction thresholds.
    min_cluster_size: int = Field(3, ge=2)
    """Fewest distinct tasks that form a cluster (HDBSCAN min_cluster_size): small, so
    online learning starts early."""
    cluster_min_samples: int = Field(2, ge=1)
    """HDBSCAN min_samples."""
    cluster_dims: int = Field(64, ge=2)
    """SVD dimensions the task texts are reduced to before HDBSCAN."""
    cluster_epsilon: float = Field(0.3, ge=0.0)
    """HDBSCAN cluster_selection_epsilon: clusters closer than this merge."""
    induce_batch: int = Field(20, ge=1)
    """Clusters per Prefect task with the rule inducer (the LLM inducer uses one per task)."""
    relevance_gap: float | None = Field(0.3, ge=0)
    """k is a maximum: a search leaves out a memory scoring more than this below the first
    (`retrieval.serving.within_gap`; None serves k whatever they score). Measured in
    docs/induction.md ("Ranking")."""
    relevance_ratio: float | None = Field(0.75, gt=0, le=1)
    """k is a maximum: a search also leaves out a memory scoring below this share of the
    first's score (`retrieval.serving.within_gap`; None: no such bound). Measured on the three
    shared sets in docs/induction.md ("Ranking")."""
    cover_weight: float | None = Field(0.35, ge=0)
    """When a task recurs (a successful stored run among its nearest is of the same task up to
    its example values), what is served is chosen with its nearest successful stored runs as
    evidence: the first-ranked memory, then the best-ranked ones that most raise those runs'
    joint coverage plus this weight times their joint precision (`retrieval.cover`). None, or
    a task not seen before: the memories within the relevance gap and ratio. Measured in
    docs/metrics.md ("Serving a task that recurs")."""
    evidence_limit: int = Field(100_000, ge=0)
    """The newest successful runs of a namespace that search keeps as that evidence (their task
    vectors, texts and actions: ~2 KB a run)."""
    relevance_floor: float | None = Field(None, ge=0, le=1)
    """When neither the memory keyed by example tasks nearest to a task (cosine, less the share
    penalty) nor any task the namespace has stored a run of (the newest `evidence_limit`) is
    as similar to it as this, the task is from no known domain and is served none of those
    memories; a task that recurs (see `cover_weight`) is always served. 0 serves whatever is
    nearest; None (the default): the embedder's own, `EMBEDDER_FLOORS` (`Settings.floor`)."""
    subroutines: bool = True
    """Also induce sub-routines: segments of one shape that recur across the tasks of
    different clusters (`induction/abstract/subroutines.py`), served beside the task-level workflows
    for what they lack, which are composed of them. Measured against off in docs/induction.md."""
    cluster_sample: int = Field(20_000, ge=2)
    """A full induction run's bound (`induction.plan.bounded`): each agent's clustering is fitted on
    at most this many of its distinct task texts (a hash sample; every other text joins the
    cluster of its nearest clustered text in the fit's projection), and each cluster is
    induced from at most this many of its runs (a hash sample of their ids), so the run's
    memory follows this, not the namespace. At or below it nothing is sampled. Measured in
    docs/scaling.md ("Induction in bounded memory")."""
    literal_share: float = Field(0.1, gt=0.0, le=1.0)
    """An argument value used by fewer than this share of a namespace's runs is
    example-specific: it never appears in a workflow."""

    # Distributed induction (the induce flow only; `flows/runners.py`).
    dask_address: str | None = None
    """Where the induce flow runs its read and placement (`plan_run`) and its per-cluster
    induction (`induce_batch`): the address of a `dask.distributed` scheduler
    (`tcp://host:8786`), through prefect-dask's `DaskTaskRunner`; `local:N` starts a Dask
    cluster of N worker processes on this machine for each run; None (the default) keeps the
    flow's own task runner (Prefect's thread pool). Each worker opens the store from these
    settings: `db` must name the same store on every machine (docs/operations.md)."""

    # Recording hooks.
    flush_interval: float = Field(0.5, gt=0, le=60)
    """Seconds the hooks' background writer waits to gather a batch."""
    flush_batch: int = Field(500, ge=1)
    """Trajectories the background writer stores per commit at most."""
    flush_timeout: float = Field(5.0, gt=0, le=3600)
    """Seconds `WorkflowMemory.flush` and `close` (also at exit and on SIGTERM) wait at most
    for the background writer. Past it, `close` writes what is not stored yet to the
    unsaved-runs file (taking at most as long again) and returns: it never hangs on a store
    or disk that does not answer (docs/reliability.md)."""
    durable: bool = False
    """Durable hooks: `run.finish` (and the end of a `record` block) returns only once the run
    is fsync'ed to a local journal (`journal_path`) that the writer empties as it stores, and
    that the next `WorkflowMemory.open` replays if the process was killed. Costs ~ one fsync per
    finished run (docs/reliability.md); off by default."""

    # Input limits (every input path enforces them, with a clear reason on rejection).
    max_record_bytes: int = Field(2_000_000, ge=1_000)
    """Largest accepted interchange line, in bytes."""
    max_steps: int = Field(1_000, ge=1)
    """Most steps accepted in one trajectory."""
    max_string_chars: int = Field(200_000, ge=100)
    """Longest accepted string anywhere in a record."""
    max_depth: int = Field(32, ge=2)
    """Deepest accepted nesting of arguments and meta."""

    # Secrets and personal data.
    scrub: list[ScrubKind] = Field(default_factory=lambda: list(DEFAULT_SCRUB))
    """What is masked in every trajectory before it is stored: `secrets` (API keys, bearer
    tokens, passwords and other credential-named arguments), `cards` (payment card numbers),
    `emails` (e-mail addresses), `phones` (phone numbers). Empty: store as recorded."""

    # HTTP API (`flowmem api`).
    api_token: SecretStr | None = None
    """Bearer token the API's write routes require; without one, writes are refused (403)."""
    api_read_token: bool = False
    """Whether the API's read routes require the token too."""
    api_host: str = "127.0.0.1"
    """Interface `flowmem api` listens on."""
    api_port: int = Field(8765, ge=1, le=65535)
    """Port `flowmem api` listens on."""
    api_workers: int = Field(1, ge=1, le=64)
    """Server processes `flowmem api` runs (uvicorn's workers, started by spawn, each with its
    own connection and served index). A search is CPU work under one GIL: one process serves
    about one core's worth; give one per core to use them all. Each worker holds its own index
    in memory, and sees another worker's status change or rollback within the index's check
    interval (0.25 s), not at once."""

    @field_validator("dask_address")
    @classmethod
    def _dask_address(cls, value: str | None) -> str | None:
        if not value:  # FLOWMEM_DASK_ADDRESS= (empty): the flow's own task runner
            return None
        if not re.fullmatch(DASK_ADDRESS, value):
            raise ValueError("a Dask scheduler address is expected, e.g. tcp://10.0.0.5:8786, or local:N")
        return value

    @field_validator("embedder_path")
    @classmethod
    def _static_needs_a_model(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value and info.data.get("embedder") == "static":
            raise ValueError("FLOWMEM_EMBEDDER=static needs the directory of a model2vec model here")
        return value or None

    @field_validator("llm_base_url", "s3_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if not value:  # FLOWMEM_LLM_BASE_URL= (empty): the OpenAI default
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("an http:// or https:// URL is expected, e.g. http://localhost:8000/v1")
        return value

    @property
    def floor(self) -> float:
        """The relevance floor search applies: `relevance_floor`, or the embedder's own."""
        return EMBEDDER_FLOORS[self.embedder] if self.relevance_floor is None else self.relevance_floor

    @property
    def cluster_params(self) -> ClusterParams:
        """The clustering settings."""
        from flowmem.induction.cluster.cluster import ClusterParams

        return ClusterParams(
            min_cluster_size=self.min_cluster_size,
            min_samples=self.cluster_min_samples,
            dims=self.cluster_dims,
            epsilon=self.cluster_epsilon,
        )

    def _beside_db(self, given: str | None, name: str) -> Path:
        """`given`, else `<db>.<name>` beside a local store, `.flowmem/<name>` (under the working
        directory) for an object-store URI."""
        if given:
            return Path(given)
        if "://" in self.db:
            return Path(".flowmem") / name
        db = Path(self.db)
        return db.with_name(f"{db.name}.{name}")

    @property
    def spool_path(self) -> Path:
        """The spool directory."""
        return self._beside_db(self.spool, "spool")

    @property
    def ann_cache_path(self) -> Path:
        """Where the HNSW indexes search builds are kept (`ann_cache`)."""
        return self._beside_db(self.ann_cache, "ann")

    @property
    def journal_path(self) -> Path:
        """The durable hooks' journal directory, next to the spool."""
        return self.spool_path.with_name(self.spool_path.name.replace("spool", "journal"))

    @property
    def quarantine_path(self) -> Path:
        """Where rejected input lines are written."""
        return self._beside_db(self.quarantine, "quarantine.jsonl")
