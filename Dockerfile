# Builds the project-manager service. Needs the Cargo registry at build time only.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p project-manager

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 pm && mkdir -p /data && chown pm /data
COPY --from=build /src/target/release/project-manager /usr/local/bin/project-manager
USER pm
WORKDIR /data
ENV PM_BIND=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/project-manager"]
