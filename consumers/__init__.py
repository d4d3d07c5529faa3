"""Sources of scored discharges (Kafka, embedded replay)."""
