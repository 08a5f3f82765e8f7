# One image for every process of the bot (docker-compose.yml builds it once and runs each
# service from it with its own command): `bot slack`, `bot discord`, `bot clock`, `bot ingest`.
#
#   docker build -t docbot .
#   docker run --rm -e ANTHROPIC_API_KEY -v "$PWD/my-docs:/knowledge:ro" -v docbot-data:/data \
#     docbot sh -c 'bot ingest /knowledge && bot ask "How do I deploy?"'
#
# Stop a `bot slack` or `bot discord` container with `docker stop -t 30`: on SIGTERM it lets
# the answers in progress finish (or apologises for them) for up to 25 s, and Docker's own
# 10 s would kill it first, leaving the askers' placeholders as they were.
#
# Nothing is downloaded at run time: the embedding model comes from PyPI with the install.
FROM python:3.11-slim

# The project pins the 8.x Elasticsearch client; a 9.x cluster needs the 9.x client installed
# over it (pip warns about the pin; `bot doctor` checks the client against the server).
ARG ES_CLIENT="elasticsearch[async]>=8.19,<9"

# git sources (`type: git`) run the git command: Debian's (2.39; 2.31+ sends a private
# repository's token).
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . .
RUN pip install --no-cache-dir . && pip install --no-cache-dir "${ES_CLIENT}" \
    && useradd --create-home --uid 1000 bot && mkdir /data && chown bot /data

# The index, conversations and embedding cache (storage.data_dir): mount a volume here.
ENV BOT_STORAGE__DATA_DIR=/data
USER bot
CMD ["bot", "--help"]
