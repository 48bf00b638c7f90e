package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
)

// A workspace's agent token reaches its service as a Swarm secret.

// secretName is the name of a workspace's token secret: secrets cannot
// change, so a new token is a new secret.
func secretName(workspaceID, token string) string {
	h := sha256.Sum256([]byte(token))
	return "patina-" + workspaceID + "-token-" + hex.EncodeToString(h[:4])
}

// ensureSecret makes the secret holding the agent's token.
func (s *Swarm) ensureSecret(ctx context.Context, workspaceID, token string) (string, error) {
	name := secretName(workspaceID, token)
	list, err := s.api.SecretList(ctx, swarm.SecretListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return "", fmt.Errorf("list secrets: %w", err)
	}
	for _, sec := range list {
		if sec.Spec.Name == name && sec.Spec.Labels[LabelWorkspace] == workspaceID {
			return sec.ID, nil
		}
	}
	resp, err := s.api.SecretCreate(ctx, swarm.SecretSpec{
		Annotations: swarm.Annotations{Name: name, Labels: s.labels(workspaceID)},
		Data:        []byte(token),
	})
	if err != nil {
		return "", fmt.Errorf("create the agent's secret: %w", err)
	}
	return resp.ID, nil
}
