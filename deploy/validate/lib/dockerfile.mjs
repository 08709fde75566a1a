// A small Dockerfile reader: instructions with their arguments (continuation lines joined,
// comments dropped) grouped into stages. Enough for static checks; not a full parser.

// Returns [{ from, name, instructions: [{ keyword, args, line }] }] plus the ARGs before FROM.
export function parseDockerfile(text) {
  const instructions = [];
  let pending = null;
  text.split("\n").forEach((raw, index) => {
    const line = raw.replace(/\r$/, "");
    if (pending === null && (/^\s*#/.test(line) || line.trim() === "")) return;
    if (pending !== null && /^\s*#/.test(line)) return;
    const continued = /\\\s*$/.test(line);
    const body = line.replace(/\\\s*$/, "");
    if (pending === null) pending = { text: body, line: index + 1 };
    else pending.text += ` ${body.trim()}`;
    if (!continued) {
      const match = /^\s*(\w+)\s*(.*)$/s.exec(pending.text);
      instructions.push({ keyword: match[1].toUpperCase(), args: match[2].trim(), line: pending.line });
      pending = null;
    }
  });
  const globalArgs = [];
  const stages = [];
  for (const instruction of instructions) {
    if (instruction.keyword === "FROM") {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      stages.push({ from: m?.[1], name: m?.[2], line: instruction.line, instructions: [] });
    } else if (stages.length === 0) {
      if (instruction.keyword === "ARG") globalArgs.push(instruction.args.split("=")[0]);
    } else {
      stages[stages.length - 1].instructions.push(instruction);
    }
  }
  return { globalArgs, stages };
}

// Splits COPY/ADD arguments into flags (--from=, --chown=, ...), sources and destination.
export function copyParts(args) {
  let words;
  if (args.trim().startsWith("[")) {
    words = JSON.parse(args);
  } else {
    words = args.split(/\s+/).filter(Boolean);
  }
  const flags = {};
  while (words.length > 0 && words[0].startsWith("--")) {
    const [key, value] = words.shift().slice(2).split("=");
    flags[key] = value ?? true;
  }
  return { flags, sources: words.slice(0, -1), destination: words[words.length - 1] };
}
