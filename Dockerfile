# The vfr-monitor service image. Pinned base; the package and its dependencies come
# from PyPI at build time (ranges fixed in pyproject.toml).
FROM python:3.11.11-slim-bookworm

RUN useradd --create-home --uid 10001 vfr
WORKDIR /opt/vfr-monitor
COPY pyproject.toml README.md ./
COPY monitor ./monitor
COPY consumers ./consumers
COPY batch_axes ./batch_axes
# The Axis 1 kernels (numba) are compiled at build time into a cache the service user
# owns, so a container start loads them instead of compiling (numba skips a cache
# directory it cannot write, so site-packages' __pycache__ would not do).
ENV NUMBA_CACHE_DIR=/opt/vfr-monitor/numba-cache
RUN pip install --no-cache-dir . && mkdir -p /data && chown vfr /data \
    && python -c "from monitor.core.axis1 import compile_kernels; compile_kernels()" \
    && chown -R vfr "$NUMBA_CACHE_DIR"

USER vfr
EXPOSE 9464
VOLUME ["/data"]
ENTRYPOINT ["vfr-monitor"]
CMD ["run", "--config", "/etc/vfr-monitor/monitor.toml"]
