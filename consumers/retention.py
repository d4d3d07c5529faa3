"""Start-up check: do the input topics keep records as long as the service needs them?

A replacement instance (after a crash, or when partitions move to another member of the
consumer group) rebuilds a model's windows and audit cohort by replaying the topic, so the
topic must still hold the last ``horizon_days`` of records (``MonitorConfig.horizon_days``:
the audit cohort, or a time window if longer). Kafka's default ``retention.ms`` is 7 days,
the default cohort 90: the check stops start-up with a message that names the topic
setting to change, unless ``kafka.retention_check`` says "warn" or "off".

A size cap (``retention.bytes``) can also drop records early; it cannot be compared with
a time span, so it is reported with the warning, never refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from consumers.kafka_source import _kafka
from monitor.config import StartupError
from monitor.config.sources import KafkaConfig

log = logging.getLogger(__name__)

DAY_MS = 86_400_000


@dataclass(frozen=True)
class TopicRetention:
    """A topic's retention settings as the broker reports them (-1: unlimited)."""

    topic: str
    retention_ms: int
    retention_bytes: int

    def covers(self, horizon_days: float) -> bool:
        return self.retention_ms < 0 or self.retention_ms >= horizon_days * DAY_MS


def topic_retention(cfg: KafkaConfig) -> list[TopicRetention]:
    """``retention.ms`` and ``retention.bytes`` of each of ``cfg.topics`` (admin client).

    A topic the broker does not know is left out (it may be created by the producers later,
    with the broker's defaults: the check runs again at the next start).
    """
    kafka = _kafka()
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kafka.KafkaAdminClient(**cfg.client_kwargs())
    try:
        answer = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t) for t in cfg.topics],
            config_filter="all",
        )
    finally:
        admin.close()
    out = []
    for topic in cfg.topics:
        entries = answer.get("topic", {}).get(topic) or {}
        if "retention.ms" not in entries:
            continue
        out.append(
            TopicRetention(
                topic,
                int(entries["retention.ms"]["value"]),
                int(entries.get("retention.bytes", {}).get("value", -1)),
            )
        )
    return out


def retention_problems(
    retentions: list[TopicRetention], horizon_days: float
) -> tuple[list[str], list[str]]:
    """(too short, size-capped) messages; pure, so the wording is tested without a broker.

    >>> short, capped = retention_problems([TopicRetention("t", 7 * DAY_MS, -1)], 90)
    >>> short[0].split(":")[0]
    "topic 't' keeps records for 7 days (retention.ms=604800000)"
    """
    short, capped = [], []
    need_ms = round(horizon_days * DAY_MS)
    for r in retentions:
        if not r.covers(horizon_days):
            short.append(
                f"topic {r.topic!r} keeps records for {r.retention_ms / DAY_MS:g} days "
                f"(retention.ms={r.retention_ms}): shorter than the {horizon_days:g}-day horizon "
                "the service rebuilds windows and audit cohorts from (service.axes.cohort_days, or "
                "window.days for a time window). Raise the topic's retention.ms to at least "
                f"{need_ms} (kafka-configs.sh --alter --entity-type topics --entity-name "
                f"{r.topic} --add-config retention.ms={need_ms}), or lower "
                'service.axes.cohort_days, or set kafka.retention_check = "warn"'
            )
        if r.retention_bytes >= 0:
            capped.append(
                f"topic {r.topic!r} also drops records past retention.bytes="
                f"{r.retention_bytes} per partition, whatever their age: make sure that "
                f"holds {horizon_days:g} days of records"
            )
    return short, capped


def check_topic_retention(cfg: KafkaConfig, horizon_days: float) -> None:
    """Refuse (:class:`StartupError`: the topic's setting is not ours to fix), warn, or skip."""
    if cfg.retention_check == "off":
        return

    short, capped = retention_problems(topic_retention(cfg), horizon_days)
    for message in capped:
        log.warning("kafka retention: %s", message)
    if short and cfg.retention_check == "refuse":
        raise StartupError("; ".join(short))
    for message in short:
        log.warning("kafka retention: %s", message)
