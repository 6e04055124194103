import { mkdirSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A directory laid out as the kubelet lays out a ConfigMap volume, and updated the way it updates
 * one: the files live in a timestamped directory (`..<timestamp>`), `..data` is a symlink to it,
 * and each key is a symlink `<key> -> ..data/<key>`. An update writes a new timestamped directory,
 * points a new symlink `..data_tmp` at it, renames that over `..data` (the atomic swap), then
 * removes the old directory. The key's own symlink never changes: a watch on the file itself, or
 * on its inode, misses the update, which is why the pool config loader watches the directory.
 */
export class ConfigMapVolume {
  private generation = 0;

  private constructor(readonly dir: string) {}

  static create(dir: string, files: Record<string, string>): ConfigMapVolume {
    mkdirSync(dir, { recursive: true });
    const v = new ConfigMapVolume(dir);
    const first = v.writeGeneration(files);
    symlinkSync(first, path.join(dir, '..data'));
    for (const key of Object.keys(files)) symlinkSync(path.join('..data', key), path.join(dir, key));
    return v;
  }

  /** Path of a key as the pod sees it (the symlink). */
  file(key: string): string {
    return path.join(this.dir, key);
  }

  /** The kubelet's update: new directory, `..data` swapped by a rename, old directory removed. */
  update(files: Record<string, string>): void {
    const old = readlinkSync(path.join(this.dir, '..data'));
    const next = this.writeGeneration(files);
    const tmp = path.join(this.dir, '..data_tmp');
    symlinkSync(next, tmp);
    renameSync(tmp, path.join(this.dir, '..data'));
    rmSync(path.join(this.dir, old), { recursive: true, force: true });
  }

  private writeGeneration(files: Record<string, string>): string {
    const name = `..2026_12_02_00_00_00.${String(++this.generation).padStart(9, '0')}`;
    mkdirSync(path.join(this.dir, name));
    for (const [key, content] of Object.entries(files))
      writeFileSync(path.join(this.dir, name, key), content);
    return name;
  }
}
