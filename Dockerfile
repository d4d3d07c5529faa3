# The vfr-monitor service image. Pinned base; the package and its dependencies come
# from PyPI at build time (ranges fixed in pyproject.toml).
FROM python:3.11.11-slim-bookworm

RUN useradd --create-home --uid 10001 vfr
WORKDIR /opt/vfr-monitor
COPY pyproject.toml README.md ./
COPY monitor ./monitor
COPY consumers ./consumers
COPY batch_axes ./batch_axes
RUN pip install --no-cache-dir . && mkdir -p /data && chown vfr /data

USER vfr
EXPOSE 9464
VOLUME ["/data"]
ENTRYPOINT ["vfr-monitor"]
CMD ["run", "--config", "/etc/vfr-monitor/monitor.toml"]
