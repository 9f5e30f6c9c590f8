#!/usr/bin/env python3
"""Appends one layer to an image of an OCI layout, as the image tests need
it (tests/image/run.sh): addlayer.py LAYOUT TAG ENTRIES-JSON, entries being
{"name", "type": file|dir|symlink|hardlink|chardev, "data"?, "target"?}.
Names are written as given (../, absolute: the hostile cases). With
CORRUPT=1 the layer's bytes are not gzip but its digest and size are
right; with COMPRESS=zstd the layer is compressed by the zstd program
(application/vnd.oci.image.layer.v1.tar+zstd); with "mode" an entry gets
that mode (an integer); with ENTRYPOINT=PATH the config's Entrypoint is set."""
import gzip, hashlib, io, json, os, subprocess, sys, tarfile

layout, tag, entries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])


def blob(data):
    d = hashlib.sha256(data).hexdigest()
    with open(f"{layout}/blobs/sha256/{d}", "wb") as f:
        f.write(data)
    return "sha256:" + d


def load(digest):
    with open(f"{layout}/blobs/sha256/{digest[7:]}") as f:
        return json.load(f)


with open(f"{layout}/index.json") as f:
    index = json.load(f)
desc = [m for m in index["manifests"]
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag][0]
manifest = load(desc["digest"])
config = load(manifest["config"]["digest"])
raw = io.BytesIO()
tf = tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT)
for e in entries:
    ti = tarfile.TarInfo(e["name"])
    kind = e.get("type", "file")
    if kind == "file":
        data = e.get("data", "").encode()
        ti.size, ti.mode = len(data), e.get("mode", 0o644)
        tf.addfile(ti, io.BytesIO(data))
        continue
    ti.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
               "hardlink": tarfile.LNKTYPE, "chardev": tarfile.CHRTYPE}[kind]
    ti.mode = e.get("mode", 0o755)
    ti.linkname = e.get("target", "")
    ti.devmajor, ti.devminor = 1, 3
    tf.addfile(ti)
tf.close()
tar = raw.getvalue()
zstd = os.environ.get("COMPRESS") == "zstd"
if zstd:
    layer = subprocess.run(["zstd", "-q", "-c", "-3"], input=tar, stdout=subprocess.PIPE,
                           check=True).stdout
else:
    layer = gzip.compress(tar, mtime=0)
if os.environ.get("CORRUPT"):
    layer = b"this is not a compressed stream " * 40
media = "application/vnd.oci.image.layer.v1.tar+" + ("zstd" if zstd else "gzip")
manifest["layers"].append({"mediaType": media,
                           "digest": blob(layer), "size": len(layer)})
config["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(tar).hexdigest())
if os.environ.get("ENTRYPOINT"):
    config.setdefault("config", {})["Entrypoint"] = [os.environ["ENTRYPOINT"]]
cb = json.dumps(config).encode()
manifest["config"] = {"mediaType": "application/vnd.oci.image.config.v1+json",
                      "digest": blob(cb), "size": len(cb)}
mb = json.dumps(manifest).encode()
desc["digest"], desc["size"] = blob(mb), len(mb)
with open(f"{layout}/index.json", "w") as f:
    json.dump(index, f)
