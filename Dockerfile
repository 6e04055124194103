# syntax=docker/dockerfile:1
# Multi-stage build: compile TypeScript with dev dependencies, ship production dependencies only.

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:24-bookworm-slim
LABEL org.opencontainers.image.title="node-lifecycle-controller" \
      org.opencontainers.image.description="Kubernetes node-lifecycle controller: lease-based node health, taints and pod readiness, with leader election" \
      org.opencontainers.image.licenses="Apache-2.0"
# Nothing runs npm, npx, corepack or yarn at run time: drop them (less to patch and to scan).
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# Non-root; nothing is written at runtime, so a read-only root filesystem works.
USER 65532:65532
# node itself is PID 1 and handles SIGTERM/SIGINT (graceful shutdown, lease release); no npm, no shell.
ENTRYPOINT ["node", "dist/main.js"]
