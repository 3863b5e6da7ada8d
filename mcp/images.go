package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// Images go back to a client as MCP image content, so that a model sees
// the figure its program drew: view_image shows one of a session's, and
// execute's result carries those its program created or changed. What an
// image is, the content says, never its name.

// maxImage is the largest image a result carries: its base64 stays under
// 5 MB, the most that common model APIs take for one image.
const maxImage = 3 << 20

// maxResultImages is how many images one execute result carries; a note
// names those left out.
const maxResultImages = 4

// imageTypes are the media types of the images a client is sent: those
// that model APIs take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// imageInfo is what view_image returns besides the image.
type imageInfo struct {
	Path string `json:"path"`
	MIME string `json:"mime"`
	Size int    `json:"size"`
}

func (s *Server) handleViewImage(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var args struct {
		Session string `json:"session"`
		Path    string `json:"path"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return badArgs("view_image", `{"session": "NAME", "path": "plot.png"}`, err), nil
	}
	rel, env := filePath(args.Path)
	if env != nil {
		return refused(env), nil
	}
	ses, env := s.session(req, args.Session)
	if env != nil {
		return refused(env), nil
	}
	data, mime, env := readImage(ses.Workspace, rel)
	if env != nil {
		return refused(env), nil
	}
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: fmt.Sprintf("%s: %s, %d bytes", rel, mime, len(data))},
			&sdk.ImageContent{Data: data, MIMEType: mime},
		},
		StructuredContent: imageInfo{Path: rel, MIME: mime, Size: len(data)},
	}, nil
}

// readImage reads the image rel of the workspace dir: a regular file,
// reached through no symbolic link, of one of imageTypes by its content,
// and at most maxImage bytes.
func readImage(dir, rel string) ([]byte, string, *codecell.Envelope) {
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, "", fileRefusal(err)
	}
	defer root.Close()
	f, info, err := root.Open(rel)
	if err != nil {
		return nil, "", fileRefusal(err)
	}
	defer f.Close()
	if info.IsDir() {
		return nil, "", codecell.Errorf(codecell.KindValidation, codeNotRegular, "%s is a directory, not an image", rel).WithHints(
			"list it with list_files to find the image")
	}
	tooLarge := func(size int64) *codecell.Envelope {
		return codecell.Errorf(codecell.KindLimit, codeTooLarge, "%s is %.1f MiB; an image shown may be at most %d MiB", rel, float64(size)/(1<<20), maxImage>>20).WithHints(
			"save a smaller one (matplotlib: a lower dpi, or JPEG) and view that",
			"or read it in parts with read_file")
	}
	if info.Size() > maxImage {
		return nil, "", tooLarge(info.Size())
	}
	// The file may grow after the stat: the read is bounded all the same.
	data, err := io.ReadAll(io.LimitReader(f, maxImage+1))
	if err != nil {
		return nil, "", fileRefusal(err)
	}
	if len(data) > maxImage {
		return nil, "", tooLarge(int64(len(data)))
	}
	mime := workspace.MIMEOf(data[:min(len(data), workspace.SniffLen)])
	if !imageTypes[mime] {
		return nil, "", codecell.Errorf(codecell.KindValidation, codeNotImage, "%s is %s, not an image that can be shown (PNG, JPEG, GIF or WebP, by its content)", rel, or(mime, "empty")).WithHints(
			"read it with read_file",
			"or have a program convert it to PNG (for SVG or PDF, save the figure as PNG instead)")
	}
	return data, mime, nil
}

// resultImages reads, from the workspace dir after a run, the images the
// run created or modified: at most maxResultImages of them, in the order
// of the file list, each at most maxImage bytes. notes say which were left
// out, and how to see them: session is the run's session, "" for none, and
// sessions says whether the server keeps any.
func resultImages(dir string, files []codecell.FileChange, session string, sessions bool) (images []*sdk.ImageContent, shown map[string]bool, notes []string) {
	shown = map[string]bool{}
	var leftOut, tooLarge []string
	for _, f := range files {
		if f.Change == codecell.Deleted || f.Symlink != "" || !imageTypes[f.MIME] {
			continue
		}
		if len(images) == maxResultImages {
			leftOut = append(leftOut, f.Path)
			continue
		}
		if f.Size > maxImage {
			tooLarge = append(tooLarge, fmt.Sprintf("%s (%.1f MiB)", f.Path, float64(f.Size)/(1<<20)))
			continue
		}
		data, mime, env := readImage(dir, f.Path)
		if env != nil {
			notes = append(notes, fmt.Sprintf("the image %s is not shown: %s", f.Path, env.Message))
			continue
		}
		images = append(images, &sdk.ImageContent{Data: data, MIMEType: mime})
		shown[f.Path] = true
	}
	see := "run the program with a session to keep its files, then view them with view_image"
	switch {
	case !sessions:
		see = "have the program save fewer images, or combine them into one"
	case session != "":
		see = fmt.Sprintf("view them with view_image in session %s", session)
	}
	if n := len(leftOut); n > 0 {
		names := strings.Join(leftOut[:min(n, 10)], ", ")
		if n > 10 {
			names += fmt.Sprintf(" and %d more", n-10)
		}
		notes = append(notes, fmt.Sprintf("the run made %d images more than the %d a result shows; not shown: %s; %s", n, maxResultImages, names, see))
	}
	if len(tooLarge) > 0 {
		notes = append(notes, fmt.Sprintf("images over the %d MiB a result shows are not shown: %s; save them smaller (matplotlib: a lower dpi, or JPEG)", maxImage>>20, strings.Join(tooLarge, ", ")))
	}
	return images, shown, notes
}
