# syntax=docker/dockerfile:1
# The sockbench image: the agent (`sockbench server`, the default) and the coordinator
# (`sockbench mesh`) of deploy/kubernetes/, or any other subcommand.
#   docker build -t registry.example.com/you/sockbench:0.1.0 .
#   docker run --rm -p 5290:5290 -p 5291:5291 -p 5291:5291/udp IMAGE server --data-port 5291

# Build stage: the release binary, from the locked dependencies.
FROM rust:1-bookworm AS build
WORKDIR /src
# Dependencies first, on stub sources, so that editing src/ does not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src
COPY src ./src
# The stubs' build is older than the real sources: make sure cargo rebuilds the crate.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked \
    && cp target/release/sockbench /sockbench

# Final stage: glibc and libgcc (the binary links them dynamically), no shell, no
# package manager, user 65532 (nonroot).
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="sockbench" \
      org.opencontainers.image.description="Measure inter-process and network communication on Linux; agent and coordinator of a Kubernetes mesh" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0"
COPY --from=build /sockbench /usr/local/bin/sockbench
USER 65532:65532
# 5290/tcp: control; 5291: data, TCP and UDP (sockbench server --data-port 5291).
EXPOSE 5290/tcp 5291/tcp 5291/udp
ENTRYPOINT ["sockbench"]
CMD ["server"]
