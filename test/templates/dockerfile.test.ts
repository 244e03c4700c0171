// Database-independent: the Dockerfile parser and the build spec checks, pure functions.
import { expect, test } from "bun:test";
import { buildSpecProblem } from "../../src/templates/build-spec";
import { DockerfileError, parseDockerfile } from "../../src/templates/dockerfile";

test("the common instructions become the SDK's steps, with ARG, ENV expansion and CMD as the start command", () => {
  const { spec, copies, notes } = parseDockerfile(
    [
      "# syntax=docker/dockerfile:1",
      "ARG BASE=docker-daemon:gateway-base/debian:bookworm",
      "FROM ${BASE}",
      "ARG VERSION=1.2",
      'ENV APP_HOME=/srv/app GREETING="hello world"',
      "ENV LEGACY value with spaces",
      "WORKDIR $APP_HOME",
      "RUN apt-get update && \\",
      "    # a comment inside a continuation",
      "    apt-get install -y hello",
      'RUN ["echo", "it\'s", "$VERSION"]',
      "COPY --chown=app:app src/ ./src/",
      "ADD a.txt b.txt /opt/",
      "USER app",
      "EXPOSE 8000",
      'CMD ["python3", "-m", "http.server", "8000"]',
    ].join("\n"),
  );
  expect(spec.fromImage).toBe("docker-daemon:gateway-base/debian:bookworm");
  expect(spec.fromTemplate).toBeUndefined();
  expect(spec.steps).toEqual([
    { type: "USER", args: ["root"] },
    { type: "WORKDIR", args: ["/"] },
    { type: "ARG", args: ["VERSION", "1.2"] },
    { type: "ENV", args: ["APP_HOME", "/srv/app", "GREETING", "hello world"] },
    { type: "ENV", args: ["LEGACY", "value with spaces"] },
    { type: "WORKDIR", args: ["/srv/app"] },
    { type: "RUN", args: ["apt-get update &&  apt-get install -y hello"] },
    { type: "RUN", args: [`echo 'it'\\''s' '$VERSION'`] },
    { type: "COPY", args: ["src/", "./src/", "app", ""] },
    { type: "COPY", args: ["a.txt", "/opt/", "root", ""] },
    { type: "COPY", args: ["b.txt", "/opt/", "root", ""] },
    { type: "USER", args: ["app"] },
  ]);
  expect(copies).toEqual([
    { step: 8, src: "src/", dest: "./src/" },
    { step: 9, src: "a.txt", dest: "/opt/" },
    { step: 10, src: "b.txt", dest: "/opt/" },
  ]);
  expect(spec.startCmd).toBe("python3 -m http.server 8000");
  expect(notes).toEqual(["line 15: EXPOSE has no effect here and was skipped"]);
});

test("build arguments override ARG defaults; FROM without a registry path names a template", () => {
  const { spec } = parseDockerfile("FROM my-base\nARG WHO=world\nRUN echo hello $WHO", { WHO: "there" });
  expect(spec.fromTemplate).toBe("my-base");
  // Run as root in / (as Docker does), then E2B's user and home for the sandboxes.
  expect(spec.steps).toEqual([
    { type: "USER", args: ["root"] },
    { type: "WORKDIR", args: ["/"] },
    { type: "ARG", args: ["WHO", "there"] },
    { type: "RUN", args: ["echo hello $WHO"] },
    { type: "USER", args: ["user"] },
    { type: "WORKDIR", args: ["/home/user"] },
  ]);
  expect(parseDockerfile("FROM template:base:v2").spec.fromTemplate).toBe("base:v2");
  expect(parseDockerfile("FROM python:3").spec.fromImage).toBe("python:3");
});

test("ENTRYPOINT with CMD: exec forms joined, a shell-form ENTRYPOINT alone", () => {
  expect(parseDockerfile('FROM a/b\nENTRYPOINT ["/bin/server", "--port"]\nCMD ["80"]').spec.startCmd).toBe("/bin/server --port 80");
  expect(parseDockerfile('FROM a/b\nENTRYPOINT /bin/server --x\nCMD ["80"]').spec.startCmd).toBe("/bin/server --x");
  expect(parseDockerfile("FROM a/b\nCMD node server.js").spec.startCmd).toBe("node server.js");
});

test("what cannot be built here is refused with its line", () => {
  const refused: [string, RegExp][] = [
    ["RUN echo hi", /line 1: RUN before FROM/],
    ["FROM a/b\nFROM c/d", /line 2: multi-stage/],
    ["FROM a/b\nCOPY --from=build /x /y", /COPY --from/],
    ["FROM a/b\nADD https://example.com/x.tgz /x", /ADD of a URL/],
    ["FROM a/b\nCOPY ../secret /x", /must be a path inside the build context/],
    ["FROM a/b\nCOPY /etc/passwd /x", /must be a path inside the build context/],
    ["FROM a/b\nRUN <<EOF\necho\nEOF", /heredocs/],
    ["FROM a/b\nFROBNICATE x", /unknown instruction FROBNICATE/],
    ["# only a comment", /no FROM/],
    ['FROM a/b\nENV A="unterminated', /unterminated quote/],
  ];
  for (const [text, message] of refused) expect(() => parseDockerfile(text)).toThrow(message);
  expect(() => parseDockerfile("x".repeat(2 * 1024 * 1024))).toThrow(DockerfileError);
});

test("build specs are checked before anything runs", () => {
  const hash = "a".repeat(64);
  expect(buildSpecProblem({ fromImage: "debian:12", steps: [{ type: "RUN", args: ["true"] }, { type: "COPY", args: ["a", "/b", "", "0644"], filesHash: hash }] })).toBeUndefined();
  const bad: [unknown, RegExp][] = [
    [null, /must be an object/],
    [{ steps: [] }, /fromImage or fromTemplate/],
    [{ fromImage: "a", fromTemplate: "b" }, /not both/],
    [{ fromImage: "a", steps: [{ type: "CURL", args: [] }] }, /steps\[0\]: type must be one of/],
    [{ fromImage: "a", steps: [{ type: "COPY", args: ["a", "/b"] }] }, /filesHash/],
    [{ fromImage: "a", steps: [{ type: "RUN", args: ["true", "root; rm -rf /"] }] }, /not a valid user name/],
    [{ fromImage: "a", steps: [{ type: "USER", args: ["$(id)"] }] }, /not a valid user name/],
    [{ fromImage: "a", steps: [{ type: "ENV", args: ["A"] }] }, /name, value pairs/],
    [{ fromImage: "a", steps: [{ type: "ENV", args: ["A B", "x"] }] }, /not a valid environment variable name/],
    [{ fromImage: "a", steps: [{ type: "COPY", args: ["a", "/b", "", "rwx"], filesHash: hash }] }, /octal/],
    [{ fromImage: "a", steps: "RUN" }, /steps must be an array/],
  ];
  for (const [spec, message] of bad) expect(buildSpecProblem(spec)).toMatch(message);
});
