# The controller image: `docker build -t $IMAGE .` (see the README's install steps).
# The build stage needs the pinned toolchain and its wasm32-wasip2 target (named in
# rust-toolchain.toml; added explicitly, since not every rustup installs a toolchain
# file's targets on its own); the host's build script compiles the built-in policies.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN rustup target add wasm32-wasip2 && cargo build --release --locked -p switchyard

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/switchyard /usr/local/bin/switchyard
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/switchyard"]
CMD ["run", "--cluster", "kube"]
