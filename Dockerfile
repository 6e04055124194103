# Multi-stage build: compile TypeScript with dev dependencies, ship production dependencies only,
# on a distroless Node.js runtime (no shell, no package manager).
#
#   docker build -t node-lifecycle-controller .
#
# Needs BuildKit (the default builder since Docker 23; DOCKER_BUILDKIT=1 on older engines). Behind a
# TLS-intercepting proxy, give npm the proxy's CA as a build secret; it is mounted for the one
# `npm ci` step and never stored in a layer:
#
#   docker build --secret id=npm-ca,src=/path/to/ca-bundle.pem -t node-lifecycle-controller .
#
# No `# syntax=` line on purpose: the builder's own Dockerfile frontend is used, nothing is pulled
# to parse this file.

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm-ca; fi; \
    npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The demo (and the local control plane and simulated kubelets it drives) needs the repository
# and Go-built binaries; it is not part of the image. Nothing else imports those folders.
# Production dependencies come from a fresh `npm ci --omit=dev` out of npm's cache (no network):
# `npm prune --omit=dev` leaves the platform binaries of dev tools (biome, esbuild, rolldown) behind.
# --omit=optional leaves out @kubernetes/client-node (about 70 MB with its dependencies), needed
# only for kubeconfig auth providers (oidc, gcp, azure); in a cluster the ServiceAccount is used.
RUN npx tsc -p tsconfig.build.json \
 && rm -rf dist/cli/demo.js dist/cli/demo.js.map dist/localcluster dist/fleet \
 && find dist -name '*.map' -delete \
 && rm -rf node_modules \
 && npm ci --omit=dev --omit=optional --offline --ignore-scripts --no-audit --no-fund

FROM gcr.io/distroless/nodejs24-debian12:nonroot
LABEL org.opencontainers.image.title="node-lifecycle-controller" \
      org.opencontainers.image.description="Kubernetes node-lifecycle controller: lease-based node health, taints and pod readiness, with leader election" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# Non-root; nothing is written at runtime, so a read-only root filesystem works.
USER 65532:65532
# node itself is PID 1 and handles SIGTERM/SIGINT (graceful shutdown, lease release).
ENTRYPOINT ["/nodejs/bin/node", "dist/main.js"]
