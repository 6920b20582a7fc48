# The controller image: `docker build -t ghcr.io/switchyard-sched/switchyard:0.1.0 .`
# The build stage needs the pinned toolchain and wasm32-wasip2 (rust-toolchain.toml
# installs them); the host's build script compiles the built-in policies.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p switchyard

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/switchyard /usr/local/bin/switchyard
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/switchyard"]
CMD ["run", "--cluster", "kube"]
