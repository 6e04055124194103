# Multi-stage build: compile and bundle TypeScript with dev dependencies, ship the bundle only, on a
# distroless Node.js runtime (no shell, no package manager, no node_modules).
#
#   docker build -t node-lifecycle-controller .
#
# Needs BuildKit (the default builder since Docker 23; DOCKER_BUILDKIT=1 on older engines). Behind a
# TLS-intercepting proxy, give npm the proxy's CA as a build secret; it is mounted for the one
# `npm ci` step and never stored in a layer:
#
#   docker build --secret id=npm-ca,src=/path/to/ca-bundle.pem -t node-lifecycle-controller .
#
# Build arguments (RELEASE.md passes all three): VERSION, REVISION and SOURCE become the OCI labels
# org.opencontainers.image.version, .revision and .source, and VERSION and REVISION the build stamp
# that `--version`, the start-up log and nlc_build_info report (scripts/bundle.mjs: a VERSION other
# than package.json's fails the build). The defaults: package.json's version (a unit test keeps
# them equal), and a revision of "unknown" (the build context has no .git).
#
#   docker build --build-arg REVISION=$(git rev-parse HEAD) --build-arg SOURCE=<repository URL> .
#
# No `# syntax=` line on purpose: the builder's own Dockerfile frontend is used, nothing is pulled
# to parse this file.
#
# Other platforms: `docker build --platform linux/arm64 .` (scripts/build-image.sh builds linux/amd64,
# linux/arm64 or both). The build stage runs on the builder's own platform ($BUILDPLATFORM): the
# bundle is JavaScript, the same for every platform, so nothing is emulated at build time; only the
# runtime stage is the target platform's, and it runs no command. RUNTIME_BASE names that stage's
# base: distroless publishes a multi-platform `nonroot` and per-platform `nonroot-amd64` and
# `nonroot-arm64` tags; a release may pin a digest (RELEASE.md).

ARG VERSION=0.2.0-dev
ARG REVISION=unknown
ARG SOURCE=
ARG RUNTIME_BASE=gcr.io/distroless/nodejs24-debian12:nonroot

FROM --platform=$BUILDPLATFORM node:24-bookworm-slim AS build
ARG VERSION
ARG REVISION
WORKDIR /src
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm-ca; fi; \
    npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/bundle.mjs scripts/build-stamp.mjs scripts/run-as-script.mjs scripts/sbom.mjs ./scripts/
COPY src ./src
# `npm run build` compiles dist/ with tsc and bundles the controller with its production
# dependencies into dist/controller.mjs (+ dist/chunks/, scripts/bundle.mjs): one file loads in about
# 10 MiB less memory than ~500 modules, and the image needs no node_modules. Left out of the bundle:
# the demo (it needs the repository and Go-built binaries) and @kubernetes/client-node (an optional
# dependency, only for kubeconfig auth providers such as oidc or gcp; in a cluster the
# ServiceAccount is used), so both say they are absent when asked for.
RUN NLC_BUILD_VERSION="$VERSION" NLC_BUILD_REVISION="$REVISION" npm run build \
 && mkdir -p /out/dist \
 && cp -r dist/controller.mjs dist/chunks /out/dist/ \
 && cp package.json /out/

# The SBOM of the npm packages in the bundle, as the build above wrote it (scripts/sbom.mjs), for
# scripts/build-image.sh to export (`--target bundle-sbom -o type=local,dest=DIR`) and merge with the
# runtime base's packages into the image's SBOM. A plain build does not build this stage.
FROM scratch AS bundle-sbom
COPY --from=build /src/dist/sbom.cdx.json /

FROM ${RUNTIME_BASE}
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="node-lifecycle-controller" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.source="$SOURCE" \
      org.opencontainers.image.description="Kubernetes node-lifecycle controller: lease-based node health, taints and pod readiness, with leader election" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /out/ ./
# Non-root; nothing is written at runtime, so a read-only root filesystem works.
USER 65532:65532
# node itself is PID 1 and handles SIGTERM/SIGINT (graceful shutdown, lease release).
# --max-semi-space-size=1 (MiB): V8's young generation otherwise grows to 16 MiB semi-spaces in the
# start-up burst and keeps the pages: peak RSS 129-134 -> 101-105 MiB at 1,000 nodes, 78 -> 73 MiB
# at 100, with no steady-state CPU cost measurable and 10-25% less throughput in a large burst
# (docs/benchmarks.md, "Steady-state cost").
# --heap-growing-percent=20: after each full collection V8 lets the old generation grow by 20%
# before the next, instead of the larger factor it picks from its own GC speed, which a burst of
# start-up writes turns into that much more heap and RSS: peak RSS 109 -> 102 MiB at 1,000 nodes
# (medians of 3), no steady-state CPU cost measurable, 21-28% less throughput in a synthetic burst
# (docs/benchmarks.md, "2026-12-01, fourth").
# The benchmarks read these flags from here, so they measure what ships.
ENTRYPOINT ["/nodejs/bin/node", "--max-semi-space-size=1", "--heap-growing-percent=20", "dist/controller.mjs"]
